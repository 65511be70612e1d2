// Command paddock runs agents' shell scripts in sandboxes and keeps every decision on the
// host: what the kernel may send, which paths map where, and which steps run unasked.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/version"
)

// Exit codes, documented in README.md.
const (
	exitOK        = 0
	exitError     = 1 // any other failure
	exitUsage     = 2 // the command line is wrong
	exitConflicts = 3 // a hand-back finished with conflicts
	exitNoKernel  = 4 // no kernel binary for the sandbox could be found or built
)

// commands are the subcommands, each added by its own file.
var commands []func() *cobra.Command

// exitCoder is an error that carries the exit status it stands for: a script's own status,
// or a documented code.
type exitCoder interface {
	error
	ExitCode() int
}

// codeError ends the command with a code whose outcome its output (its result, its --json
// report) already told: a script's status, conflicts, failed children; and, when its error
// is set, a message.
type codeError struct {
	code int
	err  error
}

// outcome is the exit code of an outcome the command's output already told.
func outcome(code int, err error) *codeError { return &codeError{code: code, err: err} }

func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *codeError) Unwrap() error { return e.err }
func (e *codeError) ExitCode() int { return e.code }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "paddock",
		Short:         "Run agents' shell scripts in sandboxes, with every decision kept on the host",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = version.String()
	root.SetVersionTemplate("paddock {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err.Error()) })
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

func main() {
	// A signal cancels the command's context; the command ends as it can (a second signal
	// ends the process at once), and then the process says it was interrupted and exits
	// 128 + the signal, as a shell's child does.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	var got atomic.Value
	go func() {
		sig := <-sigs
		got.Store(sig)
		cancel()
		signal.Reset(os.Interrupt, syscall.SIGTERM) // a second one ends the process at once
	}()
	cmd, err := newRoot().ExecuteContextC(ctx)
	sig, _ := got.Load().(os.Signal)
	os.Exit(exitCode(err, sig, jsonAsked(cmd), os.Stdout, os.Stderr))
}

// jsonAsked reports whether the command that ran was asked for JSON output.
func jsonAsked(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// exitCode maps an error to the process's exit status, printing what the user must see: a
// line on stderr, and with --json the failure as one JSON object on stdout. sig is the
// signal that interrupted the command, if one did.
func exitCode(err error, sig os.Signal, asJSON bool, stdout, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	code, status := classify(err, sig)
	var ce *codeError
	told := errors.As(err, &ce) // the output said it: a script's status, conflicts
	switch {
	case code == "interrupted":
		fmt.Fprintf(stderr, "paddock: interrupted (%v)\n", sig)
	case told && ce.err == nil:
	default:
		fmt.Fprintln(stderr, "paddock:", err)
	}
	if asJSON && (!told || code == "interrupted") {
		json.NewEncoder(stdout).Encode(jsonError{Error: jsonErrorBody{Code: code, Message: err.Error(), Exit: status}})
	}
	return status
}

// jsonError is a failure as --json prints it.
type jsonError struct {
	Error jsonErrorBody `json:"error"`
}

type jsonErrorBody struct {
	Code    string `json:"code"`    // stable: usage, syntax, cwd_gone, no_kernel, interrupted, failed, …
	Message string `json:"message"` // for a person
	Exit    int    `json:"exit"`    // the process's exit status
}

// classify gives an error its stable code and the exit status it stands for: the one
// switch from an error's class to the CLI's exit codes (README's "Exit codes"). An outcome
// the command's output told (a script's status, conflicts) keeps its own code.
func classify(err error, sig os.Signal) (code string, status int) {
	var ce exitCoder
	switch {
	case sig != nil:
		n := 2 // SIGINT
		if s, ok := sig.(syscall.Signal); ok {
			n = int(s)
		}
		return "interrupted", 128 + n
	case errors.As(err, &ce):
		code = "failed"
		if ce.ExitCode() == exitConflicts {
			code = "conflicts"
		}
		if c, cd := errdefs.Of(err); c != errdefs.Internal || cd != "failed" {
			code = cd
		}
		return code, ce.ExitCode()
	case strings.HasPrefix(err.Error(), "unknown command"): // cobra's own
		return "usage", exitUsage
	}
	class, code := errdefs.Of(err)
	switch class {
	case errdefs.InvalidArgument: // the command line, a setting, the script or the workspace it names
		return code, exitUsage
	case errdefs.Unavailable: // no kernel binary for the sandbox
		return code, exitNoKernel
	}
	return code, exitError
}

// usage is a command line (or a setting) that cannot be carried out as written.
func usage(msg string) error { return errdefs.New(errdefs.InvalidArgument, "usage", msg) }

// usageArgs wraps a cobra argument check so that its error is a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usage(err.Error())
		}
		return nil
	}
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// show prints v, a command's answer: as JSON with --json, else as text prints it.
func show(w io.Writer, asJSON bool, v any, text func(io.Writer) error) error {
	if asJSON {
		return printJSON(w, v)
	}
	return text(w)
}

// printed is the text form of show for v as it prints itself.
func printed(v any) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := fmt.Fprint(w, v)
		return err
	}
}

// workdir is dir, or the current directory when dir is "".
func workdir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return os.Getwd()
}
