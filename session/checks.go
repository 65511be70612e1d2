package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/workspace"
)

// Checks is what this machine offers sessions, a line each, with what to fix: each
// provider's check (the engines), whether dir's filesystem clones files for isolated
// workspaces, and the kernel binary. `paddock doctor` prints them.
func Checks(ctx context.Context, dir string) []Check {
	var checks []Check
	for _, p := range Providers() {
		if c := p.Check(ctx); c.Name != "" {
			checks = append(checks, c)
		}
	}
	return append(checks, checkEgress(), checkReflink(dir), checkKernel(ctx))
}

// egressPather is a provider that says how its sandboxes reach the network (an
// Opened.Egress path); a provider that does not leaves the sandbox its own network.
type egressPather interface{ EgressPath() string }

// checkEgress says, kind by kind, how a sandbox reaches the network: through the host's
// judging proxy, or by its own network with the proxy's variables advisory.
func checkEgress() Check {
	by := map[string][]string{}
	for _, p := range Providers() {
		path := ""
		if e, ok := p.(egressPather); ok {
			path = e.EgressPath()
		}
		by[path] = append(by[path], p.Kind())
	}
	var parts []string
	for _, w := range []struct{ path, says string }{
		{EgressSandbox, "no network interface; every connection goes through the host's judging proxy (network.allow, --allow-net, else a question)"},
		{EgressLoopback, "the kernel's own network (the host's, or the wrapper's); with --egress proxy the steps get the variables of a proxy on the host's loopback, advisory: a program may ignore them"},
		{EgressConnection, "the box's own network; --egress-via-host offers the host's proxy through the connection, advisory"},
		{"", "the sandbox's own network; no proxy"},
	} {
		if ks := by[w.path]; len(ks) > 0 {
			parts = append(parts, strings.Join(ks, ", ")+": "+w.says)
		}
	}
	return Check{Name: "egress", OK: true, Detail: strings.Join(parts, "; ")}
}

// checkReflink reports whether dir's filesystem clones files (FICLONE), which makes
// isolated workspaces cheap; without it they are byte copies.
//
// On btrfs, a workspace that is the root of a subvolume gets snapshots instead, made at
// once whatever it holds; the check says which a workspace in dir gets.
func checkReflink(dir string) Check {
	c := Check{Name: "reflink"}
	fsName := filesystem(dir)
	snap, why := workspace.Snapshots(dir)
	if snap {
		c.OK = true
		c.Detail = fmt.Sprintf("%s (btrfs) is a subvolume: isolated workspaces are snapshots, made at once whatever it holds", dir)
		return c
	}
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
	if fsName == "btrfs" {
		c.Detail += " (not snapshots: " + why + ")"
		c.Fix = "make the workspace a btrfs subvolume (btrfs subvolume create) for snapshots, made at once whatever it holds"
	}
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
func checkKernel(ctx context.Context) Check {
	c := Check{Name: "kernel"}
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
