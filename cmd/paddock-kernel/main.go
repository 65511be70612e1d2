//go:build linux

// Command paddock-kernel is the kernel a Paddock host starts in a sandbox: it serves the
// host's request frames on standard input and writes frames on standard output until its
// input ends. With -listen it serves hosts that connect to a unix socket instead, one at a
// time, and lives on between them (a daemon's container sessions, which outlive a restart
// of the daemon). `paddock-kernel host TYPE [JSON]` is the client through which programs in
// the sandbox send requests to the host; `paddock-kernel join SOCKET` joins its standard
// streams to a listening kernel's socket, for a host that reaches the sandbox only by
// running a program there (a pod's exec).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/transport/kernel"
	"github.com/paddockhq/paddock/transport/kernel/setid"
)

// joinWait bounds the wait of `paddock-kernel join` for a socket a kernel just started
// has not made yet.
const joinWait = 30 * time.Second

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	if len(os.Args) > 1 && os.Args[1] == "host" {
		os.Exit(kernel.HostClient(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) == 3 && os.Args[1] == "join" {
		// The channel a host reaches a listening kernel by where it cannot dial its socket:
		// this process's standard streams joined to the socket. The host's key passes
		// through it: undumpable, no process of the sandbox may read or steer it.
		unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		if err := kernel.Join(os.Args[2], os.Stdin, os.Stdout, joinWait); err != nil {
			fmt.Fprintln(os.Stderr, "paddock-kernel:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "shell" {
		// The kernel's shell, which the kernel starts for a script it interprets.
		fd, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fd = -1
		}
		os.Exit(kernel.Shell(fd, 0))
	}
	if len(os.Args) > 3 && os.Args[1] == "automount" {
		// The tracer the kernel starts a command through where the machine refuses
		// AT_NO_AUTOMOUNT (Debian's gVisor): PATH ARGV...
		os.Exit(kernel.Automount(os.Args[2], os.Args[3:]))
	}
	flags := flag.NewFlagSet("paddock-kernel", flag.ContinueOnError)
	flags.Usage = func() {
		fmt.Fprintln(flags.Output(), "usage: paddock-kernel [flags]    (frames on stdin and stdout)")
		fmt.Fprintln(flags.Output(), "       paddock-kernel -listen SOCKET -key-file FILE [flags]")
		fmt.Fprintln(flags.Output(), "       paddock-kernel host TYPE [JSON|-]")
		fmt.Fprintln(flags.Output(), "       paddock-kernel join SOCKET    (stdin and stdout joined to a listening kernel's socket)")
		flags.PrintDefaults()
	}
	var opts kernel.Options
	flags.DurationVar(&opts.Grace, "grace", 0, "wait between a TERM signal and KILL (default 2s)")
	flags.DurationVar(&opts.ShutdownGrace, "shutdown-grace", 0, "at exit, wait between TERM and KILL (default 500ms)")
	flags.StringVar(&opts.TempDir, "tmpdir", "", "where the host socket's directory is made (default $TMPDIR, else /tmp)")
	listen := flags.String("listen", "", "serve hosts that connect to this unix socket, one at a time, living on between them")
	keyFile := flags.String("key-file", "", "with -listen: the file holding the key a host attaches with (removed once read)")
	flags.DurationVar(&opts.OrphanAfter, "orphan-after", 0, "with -listen: end, as a shutdown does, once no host has been attached for this long (default: never)")
	flags.BoolVar(&opts.Once, "once", false, "with -listen: serve one host only, ending when its connection ends")
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
	// Before anything runs in the sandbox: no file it makes, in the host's workspace above all,
	// may carry a set-id bit, on every transport. A kernel that cannot hold that does not
	// serve.
	if err := setid.Guard(); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel:", err)
		os.Exit(1)
	}
	var err error
	if *listen != "" {
		err = listenOn(*listen, *keyFile, opts)
	} else {
		err = kernel.Run(context.Background(), os.Stdin, os.Stdout, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel:", err)
		os.Exit(1)
	}
}

// listenOn serves hosts on a unix socket at path, with the key read from keyFile.
func listenOn(path, keyFile string, opts kernel.Options) error {
	if keyFile == "" {
		return fmt.Errorf("-listen needs -key-file")
	}
	key, err := kernel.ReadKeyFile(keyFile)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	// The socket is made under a name of its own and renamed into place once it listens: a
	// host that finds it at path can connect (bound but not yet listening, it would refuse).
	// The rename also takes the place of a socket left by an earlier kernel.
	tmp := fmt.Sprintf("%s.%d", path, os.Getpid())
	os.Remove(tmp)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		l.Close()
		return err
	}
	defer os.Remove(path)
	return kernel.Listen(context.Background(), l, key, opts)
}
