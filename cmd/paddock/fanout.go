package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/daemon/api"
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
		Use:   "fanout -n N [--workspace DIR] [--parallel K] [--json] [--host unix://PATH] -- SCRIPT",
		Short: "Run SCRIPT in N isolated children at once and merge each back as it ends",
		Long: `Fanout opens a session in the workspace and spawns N children, at most K at once, each
in an isolated workspace (a reflink clone of the workspace) running SCRIPT with
PADDOCK_CHILD_INDEX set to its index (0 to N-1). Each child is handed back as it ends: paths
only it changed are taken; a path the workspace changed meanwhile is a conflict, the child's
version kept under its conflicts/ directory. Exit status: 0 when every child finished with
status 0 and nothing conflicted, 3 when a path conflicted, 1 when a child failed.
With --host unix://PATH (or PADDOCK_HOST) the children are a daemon's: its session is opened
in the workspace, each child spawned, run and closed through its API.`,
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
			var run *fanoutRun
			var err error
			if host := daemonHost(cmd.Flags()); host != "" {
				if stateDir != "" {
					return &usageError{msg: "--state-dir cannot be used with a daemon: its children's clones are in its state directory"}
				}
				run, err = fanoutHosted(ctx, cmd, host, workspaceDir)
			} else {
				run, err = fanoutEmbedded(ctx, cmd, workspaceDir, stateDir, &tf)
			}
			if err != nil {
				return err
			}
			rep, err := fanout(ctx, run, n, parallel, args[0], errOut)
			if err != nil {
				return err
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
				return outcome(exitError, fmt.Errorf("%d of %d children failed", rep.Failed, n))
			case rep.Conflicts > 0:
				return outcome(exitConflicts, fmt.Errorf("%d conflicted paths; each child's version is under its conflicts/ directory", rep.Conflicts))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&n, "children", "n", 0, "how many children")
	f.IntVar(&parallel, "parallel", 0, "how many children run at once (default: all)")
	f.StringVarP(&workspaceDir, "workspace", "w", "", "the workspace the children clone (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the combined report as JSON")
	f.StringVar(&stateDir, "state-dir", "", "where the children's clones, conflicts and reports go (default: a new directory beside the workspace, on its filesystem, removed at the end unless a child conflicted)")
	tf.register(f)
	return cmd
}

// fanoutRun is where a fan-out runs: embedded, or through a daemon. root is the workspace
// the children clone; child spawns child i, calls spawned once its workspace is made (or
// its spawn failed), runs the script in it, and hands it back; done closes the root.
type fanoutRun struct {
	root  string
	child func(ctx context.Context, i int, name, script string, spawned func()) fanoutChild
	done  func()
}

// fanout runs script in n isolated children, at most parallel at once, and reports.
func fanout(ctx context.Context, run *fanoutRun, n, parallel int, script string, errOut io.Writer) (*fanoutReport, error) {
	defer run.done()
	rep := &fanoutReport{Workspace: run.root, Children: make([]fanoutChild, n)}
	var mu sync.Mutex
	ended := 0
	warned := map[string]bool{} // guarded by mu
	// The first wave of children is cloned before any of them runs, so that each of them
	// finds the workspace as it was at the start; a child of a later wave finds it with the
	// earlier children's hand-backs in it.
	var wave sync.WaitGroup
	wave.Add(min(parallel, n))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := 0; i < n; i++ {
		g.Go(func() error {
			c := run.child(gctx, i, "child-"+strconv.Itoa(i), script, func() {
				if i < parallel {
					wave.Done()
					wave.Wait()
				}
			})
			if c.Taken == nil {
				c.Taken = []workspace.Change{}
			}
			if c.Conflicts == nil {
				c.Conflicts = []workspace.ConflictedPath{}
			}
			mu.Lock()
			rep.Children[i] = c
			ended++
			if c.Clone != nil {
				for _, w := range c.Clone.Warnings {
					// Every child meets the same (its counts and directory aside): said once,
					// for the first child, by its kind ("no reflinks").
					kind, _, _ := strings.Cut(w, ":")
					if !warned[kind] {
						warned[kind] = true
						fmt.Fprintf(errOut, "paddock: warning: %s (each child alike)\n", w)
					}
				}
			}
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
	return rep, nil
}

// childEnv is child i's own environment.
func childEnv(i int) []string { return []string{"PADDOCK_CHILD_INDEX=" + strconv.Itoa(i)} }

// fanoutEmbedded runs the children in this process, in a session opened as run opens one.
func fanoutEmbedded(ctx context.Context, cmd *cobra.Command, workspaceDir, stateDir string, tf *transportFlags) (*fanoutRun, error) {
	l, err := loadSettings(workspaceDir, cmd.Flags(), transportKeys, cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	made := stateDir == ""
	if made {
		// Beside the workspace, on its filesystem, so that the clones are reflinks.
		if stateDir, _, err = workspace.Scratch(workspaceDir, ".paddock-fanout-"); err != nil {
			return nil, err
		}
	}
	p, err := tf.prepare(ctx, workspaceDir, l)
	if err != nil {
		if made {
			os.RemoveAll(stateDir)
		}
		return nil, err
	}
	cfg := p.Config
	cfg.StateDir = stateDir
	root, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		p.Finish(ctx)
		if made {
			os.RemoveAll(stateDir)
		}
		return nil, err
	}
	return &fanoutRun{
		root: root.Workspace(),
		child: func(ctx context.Context, i int, name, script string, spawned func()) fanoutChild {
			c := fanoutChild{Index: i, Name: name, End: orchestrator.Failed}
			child, err := root.Spawn(ctx, orchestrator.ChildConfig{Name: name, Workspace: orchestrator.Isolated, Env: childEnv(i)})
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
			}
			return c
		},
		done: func() {
			root.Close()
			p.Finish(context.Background())
			if made {
				// A clean child's directory went with its hand-back: what is left is the
				// conflicted children's, each named in the report; an empty one goes.
				os.Remove(stateDir)
			}
		},
	}, nil
}

// fanoutHosted runs the children in a session of the daemon at host: each is spawned
// isolated, runs the script as a call with no budget, and is closed, which hands it back.
func fanoutHosted(ctx context.Context, cmd *cobra.Command, host, workspaceDir string) (*fanoutRun, error) {
	workspaceDir, err := filepath.Abs(workspaceDir) // the daemon's directory is not ours
	if err != nil {
		return nil, err
	}
	req, err := hostedRequest(cmd.Flags(), workspaceDir)
	if err != nil {
		return nil, err
	}
	c, err := dial(host)
	if err != nil {
		return nil, err
	}
	root, err := c.Open(ctx, req)
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, w := range root.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "paddock:", w)
	}
	return &fanoutRun{
		root: root.Workspace,
		child: func(ctx context.Context, i int, name, script string, spawned func()) fanoutChild {
			out := fanoutChild{Index: i, Name: name, End: orchestrator.Failed}
			kid, err := c.Spawn(ctx, root.ID, api.SpawnRequest{Name: name, Workspace: orchestrator.Isolated, Env: childEnv(i)})
			spawned()
			if err != nil {
				out.Error = err.Error()
				return out
			}
			out.Clone = kid.Clone
			r, err := c.Bash(ctx, kid.ID, api.BashRequest{Script: script, Budget: "-1"})
			switch {
			case err != nil:
				out.Error = err.Error()
			case r.Result == nil:
				out.Error, out.End = "the daemon answered with no result", orchestrator.Failed
			default:
				out.Result, out.End, out.Status = r.Result, r.End.Kind, r.End.Status
			}
			closed, err := c.CloseSession(context.WithoutCancel(ctx), kid.ID)
			if err != nil {
				out.Error, out.End = err.Error(), orchestrator.Failed
			}
			if h := closed.Handback; h != nil {
				out.Taken, out.Conflicts, out.Dir = h.Taken, h.Conflicts, h.Dir
			}
			return out
		},
		done: func() {
			c.CloseSession(context.Background(), root.ID)
			c.Close()
		},
	}, nil
}

// progress writes one line as a child ends.
func progress(w io.Writer, ended, n int, c fanoutChild) {
	fmt.Fprintf(w, "[%d/%d] %s %s (status %d): %d taken, %d conflicts\n", ended, n, c.Name, c.End, c.Status, len(c.Taken), len(c.Conflicts))
	if len(c.Conflicts) > 0 && c.Dir != "" {
		fmt.Fprintf(w, "  %s's versions of the conflicted paths are in %s\n", c.Name, filepath.Join(c.Dir, "conflicts"))
	}
}
