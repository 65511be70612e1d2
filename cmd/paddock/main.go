// Command paddock runs agents' shell scripts in sandboxes and keeps every decision on the
// host: what the kernel may send, which paths map where, and which steps run unasked.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
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

// codeError ends the command with a code and, when its error is set, a message.
type codeError struct {
	code int
	err  error
}

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
	root.Version = versionText()
	root.SetVersionTemplate("paddock {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

func main() {
	err := newRoot().Execute()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode maps an error to the process's exit status, printing what the user must see.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ce exitCoder
	switch {
	case errors.As(err, &ce):
		if c, ok := ce.(*codeError); !ok || c.err != nil {
			fmt.Fprintln(stderr, "paddock:", err)
		}
		return ce.ExitCode()
	case isUsage(err):
		fmt.Fprintln(stderr, "paddock:", err)
		return exitUsage
	default:
		fmt.Fprintln(stderr, "paddock:", err)
		return exitError
	}
}

// usageError is a command line that cannot be carried out as written.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command")
}

// usageArgs wraps a cobra argument check so that its error is a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{msg: err.Error()}
		}
		return nil
	}
}
