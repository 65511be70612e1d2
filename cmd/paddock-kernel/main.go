//go:build linux

// Command paddock-kernel is the kernel a Paddock host starts in a sandbox: it serves the
// host's request frames on standard input and writes frames on standard output until its
// input ends. `paddock-kernel host TYPE [JSON]` is the client through which programs in the
// sandbox send requests to the host.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/paddockhq/paddock/transport/kernel"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	if len(os.Args) > 1 && os.Args[1] == "host" {
		os.Exit(kernel.HostClient(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	flags := flag.NewFlagSet("paddock-kernel", flag.ContinueOnError)
	flags.Usage = func() {
		fmt.Fprintln(flags.Output(), "usage: paddock-kernel [flags]    (frames on stdin and stdout)")
		fmt.Fprintln(flags.Output(), "       paddock-kernel host TYPE [JSON|-]")
		flags.PrintDefaults()
	}
	var opts kernel.Options
	flags.DurationVar(&opts.Grace, "grace", 0, "wait between a TERM signal and KILL (default 2s)")
	flags.DurationVar(&opts.ShutdownGrace, "shutdown-grace", 0, "at exit, wait between TERM and KILL (default 500ms)")
	flags.StringVar(&opts.TempDir, "tmpdir", "", "where the host socket's directory is made (default $TMPDIR, else /tmp)")
	showVersion := flags.Bool("version", false, "print the version and exit")
	if err := flags.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if flags.NArg() > 0 {
		flags.Usage()
		os.Exit(2)
	}
	opts.Version = version
	if opts.Version == "" {
		opts.Version = kernel.BuildVersion()
	}
	if *showVersion {
		fmt.Println(opts.Version)
		return
	}
	if err := kernel.Run(context.Background(), os.Stdin, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel:", err)
		os.Exit(1)
	}
}
