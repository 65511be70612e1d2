package ssh_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// dump describes a tree: each path under root with its kind, mode, and content or target.
func dump(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + tgt
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %q", fi.Mode().Perm(), b)
		default:
			out[rel] = "other " + fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test where two dumps differ.
func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: %q missing; want %s", what, p, w)
		} else if g != w {
			t.Errorf("%s: %q is %s; want %s", what, p, g, w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %q is there (%s); want nothing", what, p, g)
		}
	}
}

// Names no shell word may be built from by hand: spaces, newlines, tabs, leading dashes,
// quotes, $(…), globs, backslashes, non-ASCII, a name longer than tar's 100 bytes. They go
// to the box and come back exactly, with their modes, empty directories and symlinks, over
// SFTP and over exec channels alike; so do the box's changes to them (new files, removals,
// a file become a directory and back, a hard link, a mode changed).
func TestSyncNamesRoundTrip(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) { testSyncNames(t, newBoxWith(t, w.opts)) })
	}
}

func testSyncNames(t *testing.T, b *box) {
	ctx := context.Background()
	parent := t.TempDir()
	long := strings.Repeat("long-", 30) + "name"
	roDir := "-ro 'dir'\n$(touch pwned)" // read-only: its mode is given after it is filled
	deep := filepath.Join(strings.Repeat("d", 60), strings.Repeat("e", 60), long)
	files := map[string]string{
		"a b.txt": "space\n", "new\nline.txt": "newline\n", "-rf": "dash\n", "--": "dashes\n",
		"-n x": "option\n", `'quote"`: "quotes\n", "$(touch pwned)": "subst\n", `back\slash`: "bs\n",
		"*": "glob\n", "ünï": "utf-8\n", "tab\tname": "tab\n", deep: "deep\n", "empty.txt": "",
		"sub dir/-x y": "nested\n", "not utf-8 \xff\xfe": "bytes\n",
	}
	for rel, content := range files {
		p := filepath.Join(parent, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(parent, "run me.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(parent, "private"), []byte("mine\n"), 0o600)
	os.Mkdir(filepath.Join(parent, "empty"), 0o755)
	os.Mkdir(filepath.Join(parent, "-empty dir\n"), 0o750)
	os.Mkdir(filepath.Join(parent, roDir), 0o755)
	os.WriteFile(filepath.Join(parent, roDir, "in"), []byte("in\n"), 0o644)
	os.Chmod(filepath.Join(parent, roDir), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(parent, roDir), 0o755) })
	os.Symlink("a b.txt", filepath.Join(parent, "link to a"))
	os.Symlink("/nowhere/at all", filepath.Join(parent, "-dangling"))
	os.Symlink("new\nline.txt", filepath.Join(parent, "link\nnl"))

	dir := filepath.Join(t.TempDir(), "ws")
	remote := filepath.Join(b.srv.Dir, "work", "-ws dir")
	s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: b.tr.Host, Pool: b.pool, Parent: parent, Dir: dir, Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(remote, roDir), 0o755) })
	sameTree(t, "the box's copy", dump(t, remote), dump(t, s.Copy()))
	if _, err := os.Lstat(filepath.Join(b.srv.Dir, "pwned")); err == nil {
		t.Fatal("a name was run as a command")
	}
	for rel := range files {
		a, _ := os.Stat(filepath.Join(s.Copy(), rel))
		r, _ := os.Stat(filepath.Join(remote, rel))
		if a == nil || r == nil || a.ModTime().Unix() != r.ModTime().Unix() {
			t.Errorf("%q: modification time not kept on the box", rel)
		}
	}

	// The box changes things (the box is this machine: its copy is a local directory).
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(rel string) string { return filepath.Join(remote, rel) }
	must(os.WriteFile(at("a b.txt"), []byte("changed on the box\n"), 0o644))
	must(os.WriteFile(at("new\nfile -x"), []byte("made on the box\n"), 0o640))
	must(os.Remove(at("-rf")))
	must(os.Mkdir(at("made\ndir"), 0o700))
	must(os.Symlink("$(touch pwned)", at("-l $x")))
	must(os.Chmod(at("private"), 0o640))
	must(os.Rename(at("-empty dir\n"), at("-moved dir")))
	must(os.Link(at("run me.sh"), at("hard link")))
	must(os.WriteFile(at("fresh"), []byte("fresh and linked\n"), 0o644))
	must(os.Link(at("fresh"), at("fresh link")))
	must(os.Remove(at("ünï")))
	must(os.MkdirAll(at("ünï/now a dir"), 0o755))
	must(os.Remove(at("empty")))
	must(os.WriteFile(at("empty"), []byte("now a file\n"), 0o644))
	must(os.WriteFile(at(deep), []byte("deep, changed\n"), 0o644))
	onBox := dump(t, remote)

	rep, err := s.Handback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Conflicts) != 0 {
		t.Fatalf("conflicts %+v", rep.Conflicts)
	}
	sameTree(t, "the parent after the hand-back", dump(t, parent), onBox)
	if _, err := os.Lstat(remote); !os.IsNotExist(err) {
		t.Fatalf("the box's copy is left: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(b.srv.Dir, "pwned")); err == nil {
		t.Fatal("a name was run as a command")
	}
}

// An empty workspace goes and comes back, whichever way.
func TestSyncEmpty(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			b := newBoxWith(t, w.opts)
			ctx := context.Background()
			parent := t.TempDir()
			remote := filepath.Join(b.srv.Dir, "work", "ws")
			s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: b.tr.Host, Pool: b.pool, Parent: parent, Dir: filepath.Join(t.TempDir(), "ws"), Remote: remote})
			if err != nil {
				t.Fatal(err)
			}
			if ents, err := os.ReadDir(remote); err != nil || len(ents) != 0 {
				t.Fatalf("the box's copy: %v %v", ents, err)
			}
			os.WriteFile(filepath.Join(remote, "made"), []byte("on the box\n"), 0o644)
			if _, err := s.Handback(ctx); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(parent, "made")); err != nil || string(b) != "on the box\n" {
				t.Fatalf("made: %q %v", b, err)
			}
		})
	}
}

// A box with neither SFTP nor tar takes sessions (the kernel goes over cat), but no synced
// workspace: the sync says why, and leaves nothing behind on either side.
func TestSyncWithoutTar(t *testing.T) {
	path := pathWithout(t, "tar")
	b := newBoxWith(t, sshtest.Options{NoSFTP: true, Path: path})
	ctx := context.Background()
	k := startKernel(t, b, t.TempDir())
	k.Kill()

	parent := t.TempDir()
	os.WriteFile(filepath.Join(parent, "a.txt"), []byte("a\n"), 0o644)
	dir := filepath.Join(t.TempDir(), "ws")
	remote := filepath.Join(b.srv.Dir, "work", "ws")
	_, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: b.tr.Host, Pool: b.pool, Parent: parent, Dir: dir, Remote: remote})
	if !errors.Is(err, ssh.ErrNoTar) {
		t.Fatalf("sync to a box without sftp and tar: %v; want ErrNoTar", err)
	}
	if !strings.Contains(err.Error(), "no tar") {
		t.Fatalf("the error %q does not say tar is missing", err)
	}
	for _, p := range []string{dir, remote} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left after the failed sync: %v", p, err)
		}
	}
}

// A kernel that reaches the box cut short is never put in place under its hash: the box
// checks the copy's content hash before the rename. (The box's cat here stops after 1000
// bytes, as a copy cut by a dropped channel would.)
func TestKernelUploadCheckedOnTheBox(t *testing.T) {
	path := pathWithout(t, "cat")
	os.WriteFile(filepath.Join(path, "cat"), []byte("#!/bin/sh\nexec head -c 1000\n"), 0o755)
	b := newBoxWith(t, sshtest.Options{NoSFTP: true, Path: path})
	_, err := b.tr.Start(context.Background(), transport.Spec{Kernel: kernelPath(t), Cwd: t.TempDir()})
	wantCode(t, err, ssh.CodeBox)
	if !strings.Contains(err.Error(), "content hash") {
		t.Fatalf("error %v does not say the content hash differs", err)
	}
	ents, _ := os.ReadDir(b.cache)
	if len(ents) != 0 {
		t.Fatalf("the kernel cache holds %v after a cut upload; want nothing", ents)
	}
}

// A box whose sftp subsystem is configured but not installed (the subsystem's program
// missing: it ends before it answers) is a box without SFTP.
func TestSFTPServerMissing(t *testing.T) {
	b := newBoxWith(t, sshtest.Options{SFTP: "/nonexistent/sftp-server"})
	bx, err := b.tr.Box(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if bx.SFTP {
		t.Fatal("Box().SFTP is true on a box whose sftp-server is missing")
	}
	s := b.open(t, t.TempDir())
	if res, err := s.Bash(context.Background(), "true"); err != nil || res.End.Status != 0 {
		t.Fatal(err, res)
	}
}

// pathWithout makes a directory holding every program of /usr/bin and /bin but the ones
// named, for a box's PATH.
func pathWithout(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"/usr/bin", "/bin"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if slices.Contains(names, e.Name()) {
				continue
			}
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "sh")); err != nil {
		t.Fatal("no sh for the box's PATH")
	}
	return dir
}
