package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/workspace"
)

func init() { commands = append(commands, newFanoutCmd) }

// fanoutChild is one child's line of the combined report.
type fanoutChild struct {
	Index     int                        `json:"index"`
	Name      string                     `json:"name"`
	Status    int                        `json:"status"`
	End       string                     `json:"end"` // finished, exited, refused, failed
	Error     string                     `json:"error,omitempty"`
	Taken     []workspace.Change         `json:"taken"`
	Conflicts []workspace.ConflictedPath `json:"conflicts"`
	Dir       string                     `json:"dir,omitempty"` // where its conflicts/ and handback.json are
	Result    *orchestrator.Result       `json:"result,omitempty"`
	Clone     *workspace.CloneReport     `json:"clone,omitempty"`
}

// fanoutReport is the combined report.
type fanoutReport struct {
	Workspace string        `json:"workspace"`
	Children  []fanoutChild `json:"children"`
	Failed    int           `json:"failed"`    // children whose script failed or was refused
	Conflicts int           `json:"conflicts"` // conflicted paths over every child
}

func newFanoutCmd() *cobra.Command {
	var (
		workspaceDir string
		n, parallel  int
		asJSON       bool
		stateDir     string
		tf           transportFlags
	)
	cmd := &cobra.Command{
		Use:   "fanout -n N [--workspace DIR] [--parallel K] [--json] -- SCRIPT",
		Short: "Run SCRIPT in N isolated children at once and merge each back as it ends",
		Long: `Fanout opens a session in the workspace and spawns N children, at most K at once, each
in an isolated workspace (a reflink clone of the workspace) running SCRIPT with
PADDOCK_CHILD_INDEX set to its index (0 to N-1). Each child is handed back as it ends: paths
only it changed are taken; a path the workspace changed meanwhile is a conflict, the child's
version kept under its conflicts/ directory. Exit status: 0 when every child finished with
status 0 and nothing conflicted, 3 when a path conflicted, 1 when a child failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return &usageError{msg: "-n must be at least 1"}
			}
			if parallel < 1 {
				parallel = n
			}
			if workspaceDir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspaceDir = wd
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			l, err := loadSettings(workspaceDir, cmd.Flags(), transportKeys, errOut)
			if err != nil {
				return err
			}
			pol, err := sessionPolicy(l)
			if err != nil {
				return err
			}
			if stateDir == "" {
				if stateDir, err = os.MkdirTemp("", "paddock-fanout-"); err != nil {
					return err
				}
			}
			cfg := orchestrator.Config{Workspace: workspaceDir, Limit: l.Settings.Output, Policy: pol, StateDir: stateDir}
			if _, err := tf.configure(ctx, &cfg, &l.Settings); err != nil {
				return err
			}
			root, err := orchestrator.Open(ctx, cfg)
			if err != nil {
				return err
			}
			defer root.Close()
			rep := fanoutReport{Workspace: root.Workspace(), Children: make([]fanoutChild, n)}
			var mu sync.Mutex
			ended := 0
			// The first wave of children is cloned before any of them runs, so that each of
			// them finds the workspace as it was at the start; a child of a later wave finds
			// it with the earlier children's hand-backs in it.
			var wave sync.WaitGroup
			wave.Add(min(parallel, n))
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(parallel)
			for i := 0; i < n; i++ {
				g.Go(func() error {
					c := runChild(gctx, root, i, args[0], func() {
						if i < parallel {
							wave.Done()
							wave.Wait()
						}
					})
					mu.Lock()
					rep.Children[i] = c
					ended++
					progress(errOut, ended, n, c)
					mu.Unlock()
					return nil
				})
			}
			g.Wait()
			for _, c := range rep.Children {
				if c.End != orchestrator.Finished || c.Status != 0 {
					rep.Failed++
				}
				rep.Conflicts += len(c.Conflicts)
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%d children: %d failed, %d conflicted paths\n", n, rep.Failed, rep.Conflicts)
			}
			switch {
			case rep.Failed > 0:
				return &codeError{code: exitError, err: fmt.Errorf("%d of %d children failed", rep.Failed, n)}
			case rep.Conflicts > 0:
				return &codeError{code: exitConflicts, err: fmt.Errorf("%d conflicted paths; each child's version is under its conflicts/ directory", rep.Conflicts)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&n, "children", "n", 0, "how many children")
	f.IntVar(&parallel, "parallel", 0, "how many children run at once (default: all)")
	f.StringVarP(&workspaceDir, "workspace", "w", "", "the workspace the children clone (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the combined report as JSON")
	f.StringVar(&stateDir, "state-dir", "", "where the children's clones, conflicts and reports go (default: a new temporary directory)")
	tf.register(f)
	return cmd
}

// runChild runs one child to its end and hands it back.
// spawned is called once the child's workspace is made (or its spawn failed).
func runChild(ctx context.Context, root *orchestrator.Session, i int, script string, spawned func()) fanoutChild {
	name := "child-" + strconv.Itoa(i)
	c := fanoutChild{Index: i, Name: name, End: orchestrator.Failed, Taken: []workspace.Change{}, Conflicts: []workspace.ConflictedPath{}}
	child, err := root.Spawn(ctx, orchestrator.ChildConfig{Name: name, Workspace: orchestrator.Isolated, Env: []string{"PADDOCK_CHILD_INDEX=" + strconv.Itoa(i)}})
	spawned()
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.Clone = child.CloneReport()
	res, err := child.Run(ctx, orchestrator.Call{Script: script, Budget: -1})
	if err != nil {
		c.Error = err.Error()
	} else {
		c.Result, c.End, c.Status = res, res.End.Kind, res.End.Status
	}
	if err := child.Close(); err != nil {
		c.Error = err.Error()
		c.End = orchestrator.Failed
	}
	if h := child.Handback(); h != nil {
		c.Taken, c.Conflicts, c.Dir = h.Taken, h.Conflicts, h.Dir
		if c.Taken == nil {
			c.Taken = []workspace.Change{}
		}
		if c.Conflicts == nil {
			c.Conflicts = []workspace.ConflictedPath{}
		}
	}
	return c
}

// progress writes one line as a child ends.
func progress(w io.Writer, ended, n int, c fanoutChild) {
	fmt.Fprintf(w, "[%d/%d] %s %s (status %d): %d taken, %d conflicts\n", ended, n, c.Name, c.End, c.Status, len(c.Taken), len(c.Conflicts))
}
