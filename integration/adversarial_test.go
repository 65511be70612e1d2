package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/docker"
)

// The adversarial suite: the attacks on the host's own integrity, run through the real
// paddock and paddock-kernel binaries on every transport whose sandbox is a kernel of this
// machine (local, docker, containerd). Each attack is what a hostile agent or a hostile
// repository would do; each check looks at the host afterwards, not at what Paddock says.

// hostile is one transport under attack: the paddock CLI with a clean settings home, a host
// home with credentials in it, and a workspace.
type hostile struct {
	t         *testing.T
	bin       string // paddock
	transport string
	kernel    string // the kernel's path as programs in the sandbox see it
	home      string // the host's home: its .ssh holds the secrets
	key       string // the host's private key
	authKeys  string // the host's authorized_keys
	conf      string // XDG_CONFIG_HOME
	state     string // XDG_STATE_HOME
	ws        string // the workspace
	marker    string // a host path no attack may create
}

const (
	keyText  = "HOST-PRIVATE-KEY-"
	authText = "ssh-ed25519 HOST-AUTHORIZED\n"
)

func newHostile(t *testing.T, transport string) *hostile {
	t.Helper()
	bin := paddockBinary(t)
	h := &hostile{t: t, bin: bin, transport: transport, home: t.TempDir(), conf: t.TempDir(), state: t.TempDir(), ws: t.TempDir()}
	h.kernel = docker.KernelPath
	if transport == "local" {
		h.kernel = filepath.Join(filepath.Dir(bin), "paddock-kernel")
	}
	os.MkdirAll(filepath.Join(h.home, ".ssh"), 0o700)
	h.key = filepath.Join(h.home, ".ssh", "id_rsa")
	h.authKeys = filepath.Join(h.home, ".ssh", "authorized_keys")
	os.WriteFile(h.key, []byte(keyText+randomName("")+"\n"), 0o600)
	os.WriteFile(h.authKeys, []byte(authText), 0o600)
	h.marker = filepath.Join(t.TempDir(), "host-ran-it")
	// The trusted settings: the transport under attack, and the narrow auto set the README
	// tells CI to use, so that protected and outside writes ask (and are refused: nobody is
	// attached).
	os.MkdirAll(filepath.Join(h.conf, "paddock"), 0o700)
	os.WriteFile(filepath.Join(h.conf, "paddock", "settings.yaml"),
		[]byte("kernelTransport:\n  kind: "+transport+"\nshell:\n  autoEffects: [read, write, exec, net]\n"), 0o600)
	return h
}

// run runs a script with paddock run in the workspace, as the host user whose home is h.home.
func (h *hostile) run(script string, args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	env := []string{"HOME=" + h.home, "XDG_CONFIG_HOME=" + h.conf, "XDG_STATE_HOME=" + h.state}
	return runPaddock(h.t, h.bin, h.ws, env, append(append([]string{"run"}, args...), "--", script)...)
}

// paddock runs another paddock command in the workspace with the same host.
func (h *hostile) paddock(args ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	env := []string{"HOME=" + h.home, "XDG_CONFIG_HOME=" + h.conf, "XDG_STATE_HOME=" + h.state}
	return runPaddock(h.t, h.bin, h.ws, env, args...)
}

// host runs a program in the sandbox that asks the host: the kernel's host subcommand.
// The body is a file of the workspace the program reads: a step whose words named a
// host secret would be asked itself, before its request reached the host.
func (h *hostile) host(typ string, body any) string {
	b, _ := json.Marshal(body)
	name := "req-" + randomName("") + ".json"
	if err := os.WriteFile(filepath.Join(h.ws, name), b, 0o644); err != nil {
		h.t.Fatal(err)
	}
	return h.kernel + " host " + typ + " - < " + name
}

// intact fails the test when a host secret was changed or a marker made.
func (h *hostile) intact() {
	h.t.Helper()
	if b, _ := os.ReadFile(h.authKeys); string(b) != authText {
		h.t.Errorf("the host's authorized_keys was changed: %q", b)
	}
	if _, err := os.Lstat(h.marker); err == nil {
		h.t.Errorf("a program ran on the host: %s exists", h.marker)
	}
}

// leaked fails the test when out holds the host's key.
func (h *hostile) leaked(what, out string) {
	h.t.Helper()
	if strings.Contains(out, keyText) {
		h.t.Errorf("%s: the host's private key was read:\n%s", what, out)
	}
}

// RunAdversarial runs every attack on one transport.
func RunAdversarial(t *testing.T, transport string) {
	for _, tc := range []struct {
		name string
		run  func(h *hostile)
	}{
		{"ProjectSettingsNeverWiden", attackProjectSettings},
		{"RepositoryProgramsNeverRun", attackRepositoryPrograms},
		{"FileRequestsRaced", attackFileRace},
		{"FifoDoesNotPark", attackFifo},
		{"SlowRequestHoldsNothingBack", attackSlowRequest},
		{"NoSetuidLeftBehind", attackSetuid},
		{"PaddockStateGuarded", attackState},
		{"SpawnEnvMovesNothing", attackSpawnEnv},
		{"EveryVerdictRecorded", attackAudit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, transport)
			tc.run(h)
			h.intact()
		})
	}
}

func TestAdversarialLocal(t *testing.T) { RunAdversarial(t, "local") }

func TestAdversarialDocker(t *testing.T) {
	cli := engine(t)
	ensureHostImage(t, cli)
	RunAdversarial(t, "docker")
}

func TestAdversarialContainerd(t *testing.T) {
	containerdDaemon(t)
	ensureHostImage(t, engine(t))
	RunAdversarial(t, "containerd")
}

// ensureHostImage makes the engine's host image if it lacks it (paddock run would), removed
// at the end when the test made it.
func ensureHostImage(t testing.TB, cli *client.Client) {
	t.Helper()
	if _, err := cli.ImageInspect(context.Background(), images.HostRef); cerrdefs.IsNotFound(err) {
		if _, err := images.Host(context.Background(), cli, images.HostRef, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { images.Remove(context.Background(), cli, images.HostRef) })
	}
}

// law: project_never_widens
// A project's settings, however its keys are spelled, choose no transport, widen no auto
// set and add no rule: a protected write and an outside write still ask, and no wrapper the
// project names runs.
func attackProjectSettings(h *hostile) {
	os.MkdirAll(filepath.Join(h.ws, ".paddock"), 0o755)
	os.MkdirAll(filepath.Join(h.ws, ".git", "hooks"), 0o755)
	wrapper := `["sh", "-c", "touch ` + h.marker + `; exec \"$0\" \"$@\""]`
	for i, doc := range []string{
		"kernelTranſport:\n  kind: wrapped\n  wrapped:\n    argvPrefix: " + wrapper + "\n",
		"shell:\n  autoEffectſ: [read, write, exec, net, outside, protected]\n  ruleſ:\n    - {action: allow, command: touch}\n",
		"SHELL:\n  AUTOEFFECTS: [read, write, exec, net, outside, protected]\n\"shell.rules\":\n  - {action: allow, command: touch}\n",
		"ſhell.autoEffects: [read, write, exec, net, outside, protected]\nshell.\u212aeep: 1\n",
	} {
		os.WriteFile(filepath.Join(h.ws, ".paddock", "settings.yaml"), []byte(doc), 0o644)
		out, errOut, code := h.run("touch .git/hooks/pre-commit; touch " + filepath.Join(filepath.Dir(h.marker), "outside"))
		if _, err := os.Stat(filepath.Join(h.ws, ".git", "hooks", "pre-commit")); err == nil {
			h.t.Errorf("settings %d: a project's settings let a hook be written unasked (status %d):\n%s%s", i, code, out, errOut)
		}
		h.intact()
	}
	// Kernel transport chosen by the project with no trusted kind set at all.
	os.WriteFile(filepath.Join(h.conf, "paddock", "settings.yaml"), []byte("shell:\n  autoEffects: [read, write, exec, net]\n"), 0o600)
	os.WriteFile(filepath.Join(h.ws, ".paddock", "settings.json"), nil, 0o644)
	os.WriteFile(filepath.Join(h.ws, ".paddock", "settings.yaml"),
		[]byte("kernelTranſport:\n  kind: wrapped\n  wrapped:\n    argvPrefix: "+wrapper+"\n"), 0o644)
	os.Remove(filepath.Join(h.ws, ".paddock", "settings.json"))
	h.run("true", "--transport", h.transport)
}

// law: host_git_hardened
// A repository's configuration names programs git runs (fsmonitor, hooks, pagers, diff and
// textconv drivers, filters, aliases, includes); no host path that touches the workspace's
// git runs any of them.
func attackRepositoryPrograms(h *hostile) {
	evil := filepath.Join(filepath.Dir(h.marker), "evil.sh")
	os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+h.marker+"\ncat\n"), 0o755)
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", h.ws}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+h.home)
		if out, err := cmd.CombinedOutput(); err != nil {
			h.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(h.ws, "a.txt"), []byte("one\n"), 0o644)
	os.WriteFile(filepath.Join(h.ws, ".gitattributes"), []byte("*.txt diff=evil filter=evil\n"), 0o644)
	git("add", "-A")
	git("-c", "user.name=p", "-c", "user.email=p@p", "commit", "-qm", "one")
	included := filepath.Join(h.ws, "more.config")
	os.WriteFile(included, []byte("[core]\n\tfsmonitor = "+evil+"\n"), 0o644)
	for _, kv := range [][2]string{
		{"core.fsmonitor", evil}, {"core.hooksPath", filepath.Dir(evil)}, {"core.pager", evil},
		{"pager.status", evil}, {"diff.external", evil}, {"diff.evil.textconv", evil},
		{"diff.evil.command", evil}, {"filter.evil.clean", evil}, {"filter.evil.smudge", evil},
		{"filter.evil.process", evil}, {"credential.helper", "!" + evil}, {"core.sshCommand", evil},
		{"alias.ls-files", "!" + evil}, {"alias.status", "!" + evil}, {"include.path", included},
		{"core.editor", evil}, {"sequence.editor", evil}, {"gpg.program", evil}, {"core.askPass", evil},
	} {
		git("config", kv[0], kv[1])
	}
	for _, hook := range []string{"post-checkout", "pre-commit", "post-index-change", "reference-transaction", "fsmonitor-watchman"} {
		os.WriteFile(filepath.Join(h.ws, ".git", "hooks", hook), []byte("#!/bin/sh\ntouch "+h.marker+"\n"), 0o755)
	}
	os.WriteFile(filepath.Join(h.ws, "a.txt"), []byte("two\n"), 0o644)

	if _, errOut, code := h.paddock("workspace", "list", h.ws); code != 0 {
		h.t.Errorf("workspace list: status %d: %s", code, errOut)
	}
	h.intact()
	clone := filepath.Join(h.t.TempDir(), "clone")
	if _, errOut, code := h.paddock("workspace", "clone", h.ws, clone); code != 0 {
		h.t.Errorf("workspace clone: status %d: %s", code, errOut)
	}
	os.WriteFile(filepath.Join(clone, "copy", "b.txt"), []byte("new\n"), 0o644)
	if _, errOut, code := h.paddock("workspace", "handback", clone); code != 0 {
		h.t.Errorf("workspace handback: status %d: %s", code, errOut)
	}
	h.intact()
	if _, errOut, code := h.paddock("fanout", "-n", "2", "--transport", h.transport, "--", "echo hi > f$PADDOCK_CHILD_INDEX.txt"); code != 0 {
		h.t.Errorf("fanout: status %d: %s", code, errOut)
	}
	h.intact()
	// Git steps judged to read run hardened: on the local transport they run on the host.
	// (status, diff and blame may run a filter driver no command line can switch off: they
	// are judged exec, which the auto set here lets run, as it would any program.)
	h.run("git log -p; git show; git ls-files; git grep one")
}

// law: access_judged_as_opened
// A program swaps an entry between a file and a symlink to the host's key (and a
// directory between a real one and a symlink to the host's .ssh) while it asks the host to
// read and write through them: never a byte of the key, never a write outside.
func attackFileRace(h *hostile) {
	os.WriteFile(filepath.Join(h.ws, "x"), []byte("safe\n"), 0o644)
	os.Mkdir(filepath.Join(h.ws, "d"), 0o755)
	os.WriteFile(filepath.Join(h.ws, "d", "id_rsa"), []byte("safe\n"), 0o644)
	os.WriteFile(filepath.Join(h.ws, "d", "authorized_keys"), []byte("safe\n"), 0o644)
	// The swapper is a program of the agent's own: the shell judges every command with the
	// words it runs with, so one naming the key would be refused before it ran; a program
	// is code the policy does not read (exec), and the host's file requests are what stands
	// against it. Its paths are hex, so that no word names them.
	sshDir := filepath.Dir(h.key)
	os.WriteFile(filepath.Join(h.ws, "swap.py"), []byte(fmt.Sprintf(`import os
key, ssh = bytes.fromhex(%q).decode(), bytes.fromhex(%q).decode()
def link(target, name):
    try: os.remove(name + ".l")
    except OSError: pass
    os.symlink(target, name + ".l"); os.replace(name + ".l", name)
while True:
    link(key, "x"); open("x.n", "w").write("safe\n"); os.replace("x.n", "x")
    os.rename("d", "d.real"); link(ssh, "d"); os.remove("d"); os.rename("d.real", "d")
`, hex.EncodeToString([]byte(h.key)), hex.EncodeToString([]byte(sshDir)))), 0o644)
	swap := "python3 swap.py"
	var reqs strings.Builder
	for range 150 {
		reqs.WriteString(h.host("fs.read", map[string]string{"path": h.sandboxPath("x")}) + "; ")
		reqs.WriteString(h.host("fs.read", map[string]string{"path": h.sandboxPath("d/id_rsa")}) + "; ")
		reqs.WriteString(h.host("fs.write", map[string]string{"path": h.sandboxPath("d/authorized_keys"), "content": "pwned\n"}) + "; ")
	}
	script := "(" + swap + ") >/dev/null 2>&1 & swapper=$!; " + reqs.String() + "kill $swapper; wait"
	out, errOut, _ := h.run(script)
	h.leaked("fs.read during swaps", out+errOut)
}

// sandboxPath is a workspace file's path as the sandbox sees it: every transport here
// mounts the workspace at its own path.
func (h *hostile) sandboxPath(rel string) string { return filepath.Join(h.ws, rel) }

// A FIFO (and other files that are not regular) is refused at once: it does not park the
// host, and the script goes on.
func attackFifo(h *hostile) {
	out, errOut, code := h.run("mkfifo p; " + h.host("fs.read", map[string]string{"path": h.sandboxPath("p")}) +
		"; " + h.host("fs.write", map[string]string{"path": h.sandboxPath("p"), "content": "x"}) + "; echo went-on")
	if !strings.Contains(out, "went-on") || strings.Count(out+errOut, "not_file") < 2 {
		h.t.Errorf("fs.read and fs.write of a FIFO (status %d):\n%s%s", code, out, errOut)
	}
}

// law: request_not_held_back
// A request that waits (the collect of a child that waits for a file) holds back no other:
// the program's read is answered, then it makes the file the child waits for.
func attackSlowRequest(h *hostile) {
	os.WriteFile(filepath.Join(h.ws, "small"), []byte("small-content\n"), 0o644)
	child := "while [ ! -e " + h.sandboxPath("go") + " ]; do sleep 0.05; done; echo child-done"
	script := "id=$(" + h.host("session.spawn", map[string]string{"name": "waiter", "script": child}) +
		" | sed 's/.*\"child\":\"\\([^\"]*\\)\".*/\\1/'); " +
		h.kernel + " host session.collect \"{\\\"child\\\":\\\"$id\\\"}\" > collected & " +
		h.host("fs.read", map[string]string{"path": h.sandboxPath("small")}) + " && touch go; wait; cat collected"
	out, errOut, code := h.run(script)
	if !strings.Contains(out, "small-content") || !strings.Contains(out, "child-done") {
		h.t.Errorf("a read behind a waiting collect (status %d):\n%s%s", code, out, errOut)
	}
}

// No file the sandbox leaves in the workspace carries a set-id bit.
func attackSetuid(h *hostile) {
	tarball := filepath.Join(h.ws, "suid.tar")
	src := h.t.TempDir()
	os.WriteFile(filepath.Join(src, "member"), []byte("#!/bin/sh\n"), 0o755)
	os.Chmod(filepath.Join(src, "member"), 0o4755)
	if out, err := exec.Command("tar", "-C", src, "-cf", tarball, "member").CombinedOutput(); err != nil {
		h.t.Fatalf("tar: %v\n%s", err, out)
	}
	h.run(strings.Join([]string{
		"cp /bin/sh x; chmod 4755 x", "cp /bin/sh y; chmod u+s,g+s y", "install -m 4755 /bin/sh z",
		"mkdir sd; chmod g+s sd", "tar -xpf suid.tar", "cp /bin/sh w; chmod 6777 w",
		"command -v python3 >/dev/null && python3 -c 'import os; os.close(os.open(\"p\", os.O_CREAT|os.O_WRONLY, 0o4755))'",
	}, "; "))
	filepath.WalkDir(h.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			h.t.Errorf("%s is %v on the host", p, fi.Mode())
		}
		return nil
	})
}

// Paddock's own state is guarded: its audit log and settings cannot be written unasked,
// and its credentials not read.
func attackState(h *hostile) {
	audit := filepath.Join(h.state, "paddock", "audit.jsonl")
	settings := filepath.Join(h.conf, "paddock", "settings.yaml")
	os.WriteFile(filepath.Join(h.conf, "paddock", "credentials"), []byte(keyText+"paddock\n"), 0o600)
	before, _ := os.ReadFile(settings)
	out, errOut, _ := h.run("echo forged >> " + audit + "; echo 'shell: {autoEffects: [secret]}' > " + settings +
		"; cat " + filepath.Join(h.conf, "paddock", "credentials") + "; " +
		h.host("fs.write", map[string]string{"path": settings, "content": "x"}))
	h.leaked("paddock's credentials", out+errOut)
	// The audit records the refused step, its command quoted; no line is the sandbox's own.
	if b, _ := os.ReadFile(audit); strings.Contains("\n"+string(b), "\nforged\n") {
		h.t.Errorf("the audit log was written by the sandbox")
	}
	if after, _ := os.ReadFile(settings); string(after) != string(before) {
		h.t.Errorf("the global settings were written by the sandbox: %q", after)
	}
}

// A child spawned from the sandbox with its own HOME, PATH or XDG_CONFIG_HOME moves neither
// the secrets nor the protected places.
func attackSpawnEnv(h *hostile) {
	for _, env := range [][]string{{"HOME=/nonexistent"}, {"HOME=" + h.ws}, {"XDG_CONFIG_HOME=/nonexistent", "PATH=/nonexistent"}} {
		child := "cat " + h.key + "; " + h.host("fs.read", map[string]string{"path": h.key})
		script := "id=$(" + h.host("session.spawn", map[string]any{"name": "kid", "script": child, "env": env}) +
			" | sed 's/.*\"child\":\"\\([^\"]*\\)\".*/\\1/'); " +
			h.kernel + " host session.collect \"{\\\"child\\\":\\\"$id\\\"}\""
		out, errOut, _ := h.run(script)
		h.leaked(fmt.Sprintf("a child with %v", env), out+errOut)
	}
}

// law: every_verdict_recorded
// Every verdict is one audit record: each step's and each file access's, run unasked,
// refused or failed.
func attackAudit(h *hostile) {
	os.WriteFile(filepath.Join(h.ws, "a"), []byte("a\n"), 0o644)
	h.run(strings.Join([]string{
		"cat a",
		h.host("fs.read", map[string]string{"path": h.sandboxPath("a")}),
		h.host("fs.read", map[string]string{"path": h.key}),
		h.host("fs.read", map[string]string{"path": "/nowhere/at/all"}),
		h.host("fs.write", map[string]string{"path": h.sandboxPath("b"), "content": "b"}),
		"cat " + h.key,
	}, "; "))
	f, err := os.Open(filepath.Join(h.state, "paddock", "audit.jsonl"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			Command string `json:"command"`
		}
		json.Unmarshal(sc.Bytes(), &rec)
		cmds = append(cmds, rec.Command)
	}
	// Six steps (each program the script runs) and four file accesses.
	if len(cmds) != 10 {
		h.t.Errorf("%d audit records, want 10 (6 steps, 4 file accesses):\n%s", len(cmds), strings.Join(cmds, "\n"))
	}
}
