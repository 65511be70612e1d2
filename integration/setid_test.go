package integration

import (
	"archive/tar"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The set-id attacks as a suite every transport runs: a sandbox tries every way it has to
// leave a setuid or setgid file in the host's workspace (a program any host user could then
// run as the file's owner, root when the sandbox is root), and afterwards the host finds
// none there.

// WorkspaceOpener opens a session whose working directory is the host directory ws, its
// sandbox path cwd; the session is closed at the test's end.
type WorkspaceOpener func(t *testing.T, ctx context.Context, ws string) (s *orchestrator.Session, cwd string)

// SetIDCase is how one transport's sandbox meets the set-id attacks.
type SetIDCase struct {
	// Owner, when set, is who the workspace is given to first; the sandbox must then run
	// as that uid and gid, and all it makes there is theirs.
	Owner *docker.WorkspaceOwner
	// Container says the sandbox is a container: its system directories are mounts apart
	// from the workspace, so a hard link of a setuid program into the workspace must fail,
	// and it may not make a user namespace, in which an overlay mount's copy-up (the
	// kernel's own chmod, past any filter) would put a setuid program of root's in an
	// upper directory in the workspace. On the local transport the sandbox is the host
	// user: a link would be the system's own program under another name
	// (fs.protected_hardlinks refuses a user one of root's), and a user namespace maps the
	// user's own uid alone, not root; neither is tried there.
	Container bool
}

// RunSetID runs the set-id attacks on the sessions open opens.
//
// law: no_setid_from_sandbox
func RunSetID(t *testing.T, open WorkspaceOpener, c SetIDCase) {
	ctx := testContext(t)
	owner := c.Owner
	ws := t.TempDir()
	if owner != nil {
		if err := os.Chown(ws, owner.UID, owner.GID); err != nil {
			t.Fatal(err)
		}
	}
	s, cwd := open(t, ctx, ws)
	if owner != nil {
		want := fmt.Sprintf("%d %d", owner.UID, owner.GID)
		if got := strings.TrimSpace(stdout(bash(t, ctx, s, `echo $(id -u) $(id -g)`))); got != want {
			t.Fatalf("the sandbox runs as %q, want the workspace's owner %q", got, want)
		}
	}
	attack := attackProgram(t)
	if err := copyFile(attack, filepath.Join(ws, "setid-attack"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSetIDArchive(t, filepath.Join(ws, "setid.tar"))
	suidHost := hostSetuidProgram(t)

	steps := []struct{ name, script string }{
		{"classic", `cp /bin/sh classic; chmod 4755 classic`},
		{"symbolic", `cp /bin/sh symbolic; chmod u+s,g+s symbolic`},
		{"setgid-dir", `mkdir sgid-dir; chmod g+s sgid-dir`},
		{"install", `install -m 4755 /bin/sh installed`},
		{"tar", `mkdir untarred; tar -xpf setid.tar -C untarred`},
		{"cp-p", `cp -p ` + suidHost + ` copied`},
		{"cp-a", `cp -a ` + suidHost + ` copied-a`},
	}
	if c.Container {
		steps = append(steps,
			struct{ name, script string }{"hard-link", `ln ` + suidHost + ` linked`},
			struct{ name, script string }{"overlay-copy-up", `mkdir up wk mg; unshare -Urm sh -c 'mount -t overlay overlay -o lowerdir=` +
				filepath.Dir(suidHost) + `,upperdir=up,workdir=wk mg && touch mg/` + filepath.Base(suidHost) + `'`})
	}
	for _, st := range steps {
		res := bash(t, ctx, s, `cd `+cwd+` && `+st.script)
		t.Logf("%s: %s", st.name, res)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "classic"), &st); err != nil || st.Size == 0 {
		t.Fatalf("the classic attack did not even copy its shell (%v): the test proves nothing", err)
	}
	if owner != nil && (int(st.Uid) != owner.UID || int(st.Gid) != owner.GID) {
		t.Errorf("the sandbox's file is owned by %d:%d, not the workspace's owner %d:%d", st.Uid, st.Gid, owner.UID, owner.GID)
	}

	res := bash(t, ctx, s, `cd `+cwd+` && ./setid-attack`)
	out := stdout(res)
	if !strings.Contains(out, "chmod ") {
		t.Fatalf("the attack program did not run: %s", res)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, verdict, _ := strings.Cut(line, " ")
		switch {
		case verdict == "ok":
			t.Errorf("%s: the system call succeeded", name)
		case (name == "openat2" || name == "io_uring_setup") && verdict != "ENOSYS":
			t.Errorf("%s: %s, want ENOSYS (as if the kernel lacked it, so programs fall back)", name, verdict)
		}
	}

	for _, f := range setIDFiles(t, ws) {
		t.Errorf("the sandbox left a set-id file in the workspace: %s", f)
	}
}

// setIDFiles lists what under root carries a setuid or setgid bit, with its owner, or file
// capabilities.
func setIDFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if n, err := unix.Lgetxattr(p, "security.capability", nil); err == nil && n > 0 {
			found = append(found, rel+" has file capabilities")
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			found = append(found, fmt.Sprintf("%s mode %#o uid %d gid %d", rel, st.Mode&0o7777, st.Uid, st.Gid))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// hostSetuidProgram is a setuid-root program of the host's, which the host image's sandbox
// sees at the same path (its /usr is the host's): cp -p and cp -a of it keep its bits
// unless stopped.
func hostSetuidProgram(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/passwd", "/usr/bin/su", "/usr/bin/mount", "/usr/bin/chsh", "/usr/bin/newgrp"} {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Mode&syscall.S_ISUID != 0 && st.Uid == 0 {
			return p
		}
	}
	t.Fatalf("the host has no setuid-root program in /usr/bin to copy")
	return ""
}

// writeSetIDArchive writes a tar archive made on the host whose members carry set-id bits
// and root's ownership, as a downloaded archive could.
func writeSetIDArchive(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := tar.NewWriter(f)
	body := []byte("#!/bin/sh\nid\n")
	for _, h := range []*tar.Header{
		{Name: "sgid-dir/", Typeflag: tar.TypeDir, Mode: 0o2755},
		{Name: "sgid-dir/suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: int64(len(body))},
		{Name: "both", Typeflag: tar.TypeReg, Mode: 0o6755, Size: int64(len(body))},
	} {
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := w.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// attackProgram builds testdata/setid, a static program that tries each system call that
// sets a set-id bit, into a directory of the test's.
func attackProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "setid-attack")
	if err := peer.BuildStatic(".", "./testdata/setid", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// The set-id attacks on the local transport: the kernel's own filter is what stops them.
func TestSetIDLocal(t *testing.T) {
	kernel := kernelBinary(t)
	RunSetID(t, func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
		s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: &local.Transport{Stderr: testWriter{t}},
			Kernel: kernel, Env: environ.Local(os.Environ())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, ws
	}, SetIDCase{})
}

// A workspace a user other than root owns, whose sandbox runs as that user.
var ownedWorkspace = &docker.WorkspaceOwner{UID: 4242, GID: 4343, Known: true}

// The set-id attacks on docker: the host image's sandbox in a workspace root owns (running
// as root), and in one another user owns (running as that user).
func TestSetIDDocker(t *testing.T) {
	cli := engine(t)
	img := hostImage(t, cli)
	open := func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
		return openIn(t, ctx, ws, &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}), "/work"
	}
	t.Run("Root", func(t *testing.T) { RunSetID(t, open, SetIDCase{Container: true}) })
	t.Run("Owner", func(t *testing.T) { RunSetID(t, open, SetIDCase{Owner: ownedWorkspace, Container: true}) })
	t.Run("SetFCap", func(t *testing.T) {
		RunSetID(t, func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
			h := docker.Hardening{CapAdd: []string{"setfcap"}}
			return openIn(t, ctx, ws, &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Hardening: h, Stderr: testWriter{t}}), "/work"
		}, SetIDCase{Container: true})
	})
}

// The set-id attacks on containerd, as on docker.
func TestSetIDContainerd(t *testing.T) {
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	open := func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
		return openIn(t, ctx, ws, containerdTransport(t, c, img, docker.Hardening{})), "/work"
	}
	t.Run("Root", func(t *testing.T) { RunSetID(t, open, SetIDCase{Container: true}) })
	t.Run("Owner", func(t *testing.T) { RunSetID(t, open, SetIDCase{Owner: ownedWorkspace, Container: true}) })
	t.Run("SetFCap", func(t *testing.T) {
		RunSetID(t, func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
			h := docker.Hardening{CapAdd: []string{"setfcap"}}
			return openIn(t, ctx, ws, containerdTransport(t, c, img, h)), "/work"
		}, SetIDCase{Container: true})
	})
}

// openIn opens a session on a container transport with ws bound at /work.
func openIn(t *testing.T, ctx context.Context, ws string, tr transport.Transport) *orchestrator.Session {
	t.Helper()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, pm)
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: tr, Kernel: kernelBinary(t), Env: env, PathMap: pm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The set-id attacks under gVisor through containerd, where each command also runs under the
// kernel's tracer (its filter beside the set-id one): the set-id filter still stops them.
func TestSetIDContainerdRunsc(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	RunSetID(t, func(t *testing.T, ctx context.Context, ws string) (*orchestrator.Session, string) {
		return openIn(t, ctx, ws, runscContainerd(t, c, img, docker.Hardening{})), "/work"
	}, SetIDCase{Container: true})
}
