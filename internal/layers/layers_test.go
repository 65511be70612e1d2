// Package layers holds the layers of the design (DESIGN.md): which of Paddock's packages may
// never import which. Each rule names the packages it covers and what their files may never
// import directly; the reason is the rule's comment. Tests may cross a layer to drive what is
// under test through a real peer (rules with tests false), the policy's excepted.
//
// It reads the imports `go list` gives for every package's files, its tests' apart; a deny
// entry is a prefix of an import path, one ending in $ is that package alone.
package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

const mod = "github.com/paddockhq/paddock/"

// rule is one layer: the packages it covers (prefixes of paths in the module, "" for all),
// those it leaves out, and what their files never import.
type rule struct {
	name   string
	in     []string
	out    []string
	tests  bool // whether the packages' test files are held to it too
	deny   []string
	reason string
}

var rules = []rule{
	{
		name: "policy", in: []string{"policy"}, tests: true,
		deny:   []string{mod + "transport", mod + "orchestrator", mod + "session", mod + "daemon", "github.com/docker", "github.com/containerd"},
		reason: "the policy is pure decisions: a session's facts come in through a Context, disk facts through a small FS",
	},
	{
		name: "kernel-side", in: []string{"script", "errdefs", "transport/wire", "transport/kernel", "cmd/paddock-kernel"},
		deny:   []string{mod + "policy", mod + "orchestrator", mod + "session", mod + "daemon", "github.com/docker", "github.com/containerd", "net/http$"},
		reason: "the grammar, its planner and the error classes are linked into the kernel, a small static binary: nothing of the host's side, and no HTTP (it would double the binary)",
	},
	{
		name: "transport", in: []string{"transport", "pool"},
		deny:   []string{mod + "orchestrator", mod + "session", mod + "daemon", mod + "client", mod + "cmd"},
		reason: "a transport starts kernels and carries frames; it never knows who drives it",
	},
	{
		name: "orchestrator", in: []string{"orchestrator"},
		deny: []string{
			mod + "transport/docker", mod + "transport/containerd", mod + "transport/ssh", mod + "transport/local",
			mod + "transport/wrapped", mod + "transport/kubernetes", mod + "session", mod + "daemon$", mod + "client", mod + "cmd",
		},
		reason: "the orchestrator drives any transport through the contract, never a backend by name, and no front end",
	},
	{
		name: "session", in: []string{"session", "fanout", "front"}, tests: true,
		deny:   []string{mod + "daemon$", mod + "cmd"},
		reason: "the library opens sessions for every front end and imports none of them (the API's types aside)",
	},
	{
		name: "client", in: []string{"client", "daemon/api"},
		deny: []string{
			mod + "daemon$", mod + "session", mod + "transport", mod + "orchestrator", mod + "workspace",
			mod + "policy", mod + "script",
		},
		reason: "the Go client speaks the API, whose types are its own: it links neither the daemon's server nor any part of the engine",
	},
	{
		name: "not-cmd", in: []string{""}, out: []string{"cmd"}, tests: true,
		deny:   []string{mod + "cmd"},
		reason: "nothing imports the CLI: cmd holds flags, output and exit codes only",
	},
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string

	Dir string
}

// under reports whether the module's package p is dir or beneath it ("" is the whole module).
func under(p, dir string) bool {
	rel := strings.TrimPrefix(p, mod)
	return dir == "" || rel == dir || strings.HasPrefix(rel, dir+"/")
}

func (r rule) covers(p string) bool {
	for _, d := range r.out {
		if under(p, d) {
			return false
		}
	}
	for _, d := range r.in {
		if under(p, d) {
			return true
		}
	}
	return false
}

// denies returns the deny entry that imp falls under, or "".
func (r rule) denies(imp string) string {
	for _, d := range r.deny {
		if exact, ok := strings.CutSuffix(d, "$"); ok && imp == exact || !ok && strings.HasPrefix(imp, d) {
			return d
		}
	}
	return ""
}

// violations lists each import of pkgs that a rule denies, and each rule that covers none
// of them (its paths moved).
func violations(pkgs []pkg) []string {
	var bad []string
	for _, r := range rules {
		covered := 0
		for _, p := range pkgs {
			if !r.covers(p.ImportPath) {
				continue
			}
			covered++
			imports := p.Imports
			if r.tests {
				imports = append(append(append([]string(nil), imports...), p.TestImports...), p.XTestImports...)
			}
			for _, imp := range imports {
				if d := r.denies(imp); d != "" && imp != p.ImportPath {
					bad = append(bad, p.ImportPath+" imports "+imp+" (layer "+r.name+", "+d+"): "+r.reason)
				}
			}
		}
		if covered == 0 {
			bad = append(bad, "layer "+r.name+" covers no package: its paths moved")
		}
	}
	return bad
}

func listModule(t *testing.T) []pkg {
	t.Helper()
	goBin := peer.Go(t)
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,TestImports,XTestImports,Dir", mod+"...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs = append(pkgs, p)
		// The test reads each package's directory and files itself, so that go test's cache
		// of its result is dropped when an import changes (it sees what the test opens, not
		// what go list does).
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				if _, err := os.ReadFile(filepath.Join(p.Dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list gave %d packages", len(pkgs))
	}
	return pkgs
}

func TestLayers(t *testing.T) {
	t.Parallel()
	for _, v := range violations(listModule(t)) {
		t.Error(v)
	}
}

// The rules catch what they name, in files and (where they hold tests) in test files, and
// pass what they do not.
func TestLayersCatch(t *testing.T) {
	t.Parallel()
	// One package under each rule, importing nothing, so that no rule is left covering none.
	base := []pkg{
		{ImportPath: mod + "policy"}, {ImportPath: mod + "script"}, {ImportPath: mod + "transport/docker"},
		{ImportPath: mod + "orchestrator"}, {ImportPath: mod + "session"}, {ImportPath: mod + "client"},
		{ImportPath: mod + "cmd/paddock"},
	}
	if v := violations(base); len(v) != 0 {
		t.Fatalf("no import, yet: %v", v)
	}
	for _, tc := range []struct {
		p    pkg
		want bool
	}{
		{pkg{ImportPath: mod + "policy", Imports: []string{mod + "transport/docker"}}, true},
		{pkg{ImportPath: mod + "policy/policytest", XTestImports: []string{"github.com/docker/docker/client"}}, true},
		{pkg{ImportPath: mod + "transport/kernel", Imports: []string{"net/http"}}, true},
		{pkg{ImportPath: mod + "transport/kernel", Imports: []string{"net/http/httptest"}}, false}, // $: that package alone
		{pkg{ImportPath: mod + "transport/kernel", TestImports: []string{mod + "orchestrator"}}, false},
		{pkg{ImportPath: mod + "transport/ssh", Imports: []string{mod + "session"}}, true},
		{pkg{ImportPath: mod + "pool", Imports: []string{mod + "cmd/paddock"}}, true},
		{pkg{ImportPath: mod + "orchestrator", Imports: []string{mod + "transport/kubernetes"}}, true},
		{pkg{ImportPath: mod + "orchestrator", Imports: []string{mod + "transport"}}, false},
		{pkg{ImportPath: mod + "orchestrator", Imports: []string{mod + "daemon/api"}}, false},
		{pkg{ImportPath: mod + "orchestrator", Imports: []string{mod + "daemon"}}, true},
		{pkg{ImportPath: mod + "fanout", TestImports: []string{mod + "daemon"}}, true},
		{pkg{ImportPath: mod + "daemon/api", Imports: []string{mod + "workspace"}}, true},
		{pkg{ImportPath: mod + "workspace", TestImports: []string{mod + "cmd/paddock"}}, true},
		{pkg{ImportPath: mod + "cmd/paddock", Imports: []string{mod + "cmd/paddock-kernel"}}, false},
		{pkg{ImportPath: mod + "daemon", Imports: []string{mod + "session"}}, false},
	} {
		got := len(violations(append(append([]pkg(nil), base...), tc.p))) != 0
		if got != tc.want {
			t.Errorf("%s importing %v %v %v: violation %v, want %v", tc.p.ImportPath, tc.p.Imports, tc.p.TestImports, tc.p.XTestImports, got, tc.want)
		}
	}
}
