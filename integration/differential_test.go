package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// The differential test across engines: each script gives the same steps, output and
// statuses through Podman as in a Docker container, the sandbox a user would otherwise have.
// The scripts are cmd/paddock's differential list (there checked against bash on the host).
// Under gVisor they do not all agree: Debian's runsc (20221219) answers EINVAL to the statx
// calls glibc 2.36 makes (ls, stat and cp on a named path fail), and its --oci-seccomp
// ignores a rule's errno, so the spec cannot turn statx into ENOSYS for glibc to fall back
// on (README: gVisor).

// differentialFixture writes the files the differential scripts run on into dir, which it
// empties first.
func differentialFixture(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"a.txt":          "alpha\nbeta\ngamma\n",
		"b.txt":          "one\ntwo\nthree\nfour\n",
		"c.go":           "package c\n",
		"with space.txt": "spaced\n",
		".hidden":        "hidden\n",
		"sub/d.txt":      "delta\n",
		"sub/e.md":       "# e\n",
		"nums":           "3\n1\n2\n10\n",
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// differentialScripts are cmd/paddock's differential scripts.
var differentialScripts = []string{
	`echo hello`,
	`echo hello world`,
	`echo "hello   world"`,
	`echo 'single $HOME'`,
	`echo "double $HOME"`,
	`echo $HOME`,
	`echo ${HOME}/x`,
	`echo ~`,
	`echo ~/sub`,
	`echo $NOPE_UNSET end`,
	`echo "$NOPE_UNSET" end`,
	`echo a\ b`,
	`echo $'tab\there'`,
	`printf '%s\n' a b c`,
	`printf '%s|' *.txt`,
	`echo *.txt`,
	`echo sub/*`,
	`echo *.nomatch`,
	`echo ?.go`,
	`echo [ab].txt`,
	`echo .*`,
	`ls`,
	`ls sub`,
	`ls -a | sort`,
	`cat a.txt`,
	`cat a.txt b.txt | wc -l`,
	`cat a.txt | grep beta`,
	`cat a.txt | grep nope`,
	`sort -n nums`,
	`sort nums | head -n 2`,
	`cat nums | sort -n | tail -n 1`,
	`true && echo yes`,
	`false && echo yes`,
	`false || echo fallback`,
	`true || echo never`,
	`false; echo $?`,
	`true; echo $?`,
	`sh -c 'exit 7'; echo $?`,
	`false | true; echo $?`,
	`true | false; echo $?`,
	`echo one; echo two`,
	"echo one\necho two",
	`echo x > out.txt; cat out.txt`,
	`echo x > out.txt; echo y >> out.txt; cat out.txt`,
	`cat < a.txt`,
	`wc -l < b.txt`,
	`ls nope 2>&1`,
	`ls nope 2> err.txt; cat err.txt`,
	`ls nope a.txt &> all.txt; cat all.txt`,
	`echo to-stderr >&2`,
	`echo both; ls nope`,
	`nosuchcommand`,
	`nosuchcommand; echo after $?`,
	`cd sub && pwd && ls`,
	`cd sub; cd ..; ls | head -n 1`,
	`cd nope`,
	`cd nope; echo $?`,
	`X=1; echo $X`,
	`X=hello; sh -c 'echo ${X:-unset}'`,
	`export X=hello; sh -c 'echo $X'`,
	`X=inline sh -c 'echo $X'`,
	`export A=1 B=2; echo $A$B`,
	`A=1; unset A; echo ${A}end`,
	`exit 4`,
	`echo before; exit 2; echo after`,
	`yes | head -n 3`,
	`seq 1 5 | tail -n 2`,
	`head -c 5 a.txt`,
	`echo "a b" c | wc -w`,
	`echo '"quoted"'`,
	`echo "it's"`,
	`echo a"b"'c'`,
	`grep -c a a.txt b.txt`,
	`find sub -name '*.txt'`,
	`cat 'with space.txt'`,
	`cat with\ space.txt`,
	`echo $?`,
	`test -f a.txt && echo file`,
	`[ -d sub ] && echo dir`,
	`tr a-z A-Z < a.txt`,
	`cut -c1-3 a.txt | uniq`,
	`sh -c 'echo out; echo err >&2; exit 3'`,
	`sh -c 'exit 300'; echo $?`,
	`cat < nope; echo $?`,
	`echo x > sub; echo $?`,
	`cat a.txt > nodir/x`,
}

// runDifferential runs every script in a session on ref and one on under, each on a fresh
// fixture, and reports where the results differ.
func runDifferential(t *testing.T, ref, under transport.Transport) {
	ctx := testContext(t)
	rs, rws := transportSession(t, ctx, ref, nil)
	us, uws := transportSession(t, ctx, under, nil)
	for _, script := range differentialScripts {
		run := func(s *orchestrator.Session, ws string) string {
			differentialFixture(t, ws)
			res, err := s.Bash(ctx, script)
			if err != nil {
				t.Fatalf("%q: %v", script, err)
			}
			return res.String()
		}
		if want, got := run(rs, rws), run(us, uws); got != want {
			t.Errorf("%q:\nunder test:\n%s\nreference (runc):\n%s", script, got, want)
		}
	}
}

func TestDifferentialPodman(t *testing.T) {
	pcli, _ := podmanEngine(t)
	img := hostImage(t, pcli)
	runDifferential(t, dockerRunc(t, engine(t)), &docker.Transport{Client: pcli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}})
}

// dockerRunc is a docker transport of a host image of its own, under the engine's runc.
func dockerRunc(t *testing.T, cli *client.Client) transport.Transport {
	return &docker.Transport{Client: cli, Image: hostImage(t, cli), Mounts: hostMounts(), Stderr: testWriter{t}}
}
