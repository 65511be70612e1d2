package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/session"
)

func init() { commands = append(commands, newDoctorCmd) }

// check is one line of the doctor's report.
type check = session.Check

func newDoctorCmd() *cobra.Command {
	var (
		asJSON bool
		dir    string
	)
	cmd := &cobra.Command{
		Use:   "doctor [--json] [--dir DIR]",
		Short: "Report what this machine offers Paddock, and what to fix",
		Long: `Doctor checks what sandboxes this machine can run and says how to fix what is missing:
the Docker engine (and so the default transport), containerd, a filesystem with reflinks for
isolated workspaces (in DIR, the current directory unless --dir names one), and the kernel
binary. Every check is a line: ok or fix, what was found, and the fix. The exit status is 0
whatever it finds; --json prints the checks as a JSON array.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				dir = wd
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			var checks []check
			for _, p := range session.Providers() {
				if c := p.Check(ctx); c.Name != "" {
					checks = append(checks, c)
				}
			}
			checks = append(checks, checkReflink(dir), checkKernel(ctx))
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(checks)
			}
			printChecks(out, checks)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&dir, "dir", "", "where isolated workspaces would be cloned (default: the current directory)")
	return cmd
}

func printChecks(w io.Writer, checks []check) {
	for _, c := range checks {
		mark := "ok "
		if !c.OK {
			mark = "fix"
		}
		fmt.Fprintf(w, "%s  %-10s %s\n", mark, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "     %-10s %s\n", "", c.Fix)
		}
	}
}

// checkReflink reports whether dir's filesystem clones files (FICLONE), which makes
// isolated workspaces cheap; without it they are byte copies.
func checkReflink(dir string) check {
	c := check{Name: "reflink"}
	fsName := filesystem(dir)
	src, err := os.CreateTemp(dir, ".paddock-doctor-")
	if err != nil {
		c.Detail = fmt.Sprintf("cannot test %s (%s fs): %s", dir, fsName, errText(err))
		c.Fix = "run doctor in a directory you can write, or name one with --dir"
		return c
	}
	defer os.Remove(src.Name())
	defer src.Close()
	src.WriteString("paddock")
	dst, err := os.CreateTemp(dir, ".paddock-doctor-")
	if err != nil {
		c.Detail = errText(err)
		return c
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err != nil {
		c.Detail = fmt.Sprintf("%s (%s) does not clone files (%s): isolated workspaces are byte copies", dir, fsName, errText(err))
		c.Fix = "put workspaces on XFS (mkfs.xfs -m reflink=1) or btrfs for instant clones"
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s (%s) clones files: isolated workspaces are reflink clones", dir, fsName)
	return c
}

// filesystem names the filesystem dir lies on.
func filesystem(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch uint32(st.Type) {
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// checkKernel reports the kernel binary a session would start, found or built.
func checkKernel(ctx context.Context) check {
	c := check{Name: "kernel"}
	k, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		c.Detail = oneLine(err)
		var ne *images.NoKernelError
		if errors.As(err, &ne) {
			c.Detail = fmt.Sprintf("no kernel binary for linux/%s", ne.Arch)
			c.Fix = fmt.Sprintf("CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./cmd/paddock-kernel in Paddock's source tree, beside the paddock binary, or name it in PADDOCK_KERNEL", ne.Arch, filepath.Join(exeDir(), images.KernelName))
		}
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("linux/%s at %s", runtime.GOARCH, k)
	return c
}

func exeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "."
	}
	return filepath.Dir(exe)
}

// errText is an error's cause without the path it names.
func errText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return oneLine(err)
}
