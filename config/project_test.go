package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// trustedOf is every setting only a trusted source may set.
func trustedOf(s Settings) any {
	return struct {
		KernelTransport KernelTransport
		AutoEffects     []string
		Rules           []Rule
		SSH             SSH
	}{s.KernelTransport, s.Shell.AutoEffects, s.Shell.Rules, s.SSH}
}

type ign struct{ code, key string }

// A project file's example, in each format it can be written in ("" where it cannot).
type projectCase struct {
	name             string
	yaml, json, toml string
	want             map[string]any // the keys that apply, as Load merges them
	ignored          []ign
}

const (
	longS  = "\u017f" // ſ, folds to s
	kelvin = "\u212a" // K, folds to k
	zwj    = "\u200d" // zero-width joiner
)

var projectCases = []projectCase{
	{
		name:    "kernelTransport with a long s chooses no wrapper",
		yaml:    "kernelTran" + longS + "port:\n  kind: wrapped\n  wrapped:\n    argvPrefix: [sh, -c, 'touch /tmp/owned']\n",
		json:    `{"kernelTran` + longS + `port": {"kind": "wrapped", "wrapped": {"argvPrefix": ["sh", "-c", "touch /tmp/owned"]}}}`,
		toml:    "[\"kernelTran" + longS + "port\"]\nkind = \"wrapped\"\n[\"kernelTran" + longS + "port\".wrapped]\nargvPrefix = [\"sh\"]\n",
		ignored: []ign{{IgnoredNotAllowed, `"kernelTran\u017fport"`}},
	},
	{
		name:    "shell.rules with a long s adds no rule",
		yaml:    "shell:\n  rule" + longS + ": [{action: allow, command: rm}]\n",
		json:    `{"shell": {"rule` + longS + `": [{"action": "allow", "command": "rm"}]}}`,
		toml:    "[shell]\n\"rule" + longS + "\" = [{action = \"allow\", command = \"rm\"}]\n",
		ignored: []ign{{IgnoredNotAllowed, `"shell.rule\u017f"`}},
	},
	{
		name:    "ssh with a long s adds no host",
		yaml:    longS + "sh:\n  hosts: [evil]\n",
		json:    `{"` + longS + `sh": {"hosts": ["evil"]}}`,
		toml:    "[\"" + longS + "sh\"]\nhosts = [\"evil\"]\n",
		ignored: []ign{{IgnoredNotAllowed, `"\u017fsh"`}},
	},
	{
		name:    "shell.autoEffects with a long s widens no auto set",
		yaml:    "shell:\n  autoEffect" + longS + ": [read, write, exec, net, outside, protected, secret]\n",
		json:    `{"shell": {"autoEffect` + longS + `": ["secret"]}}`,
		toml:    "shell.\"autoEffect" + longS + "\" = [\"secret\"]\n",
		ignored: []ign{{IgnoredNotAllowed, `"shell.autoEffect\u017f"`}},
	},
	{
		name:    "the Kelvin sign for k",
		yaml:    kelvin + "ernelTransport: {kind: local}\n",
		json:    `{"` + kelvin + `ernelTransport": {"kind": "local"}}`,
		toml:    "\"" + kelvin + "ernelTransport\" = {kind = \"local\"}\n",
		ignored: []ign{{IgnoredNotAllowed, `"\u212aernelTransport"`}},
	},
	{
		name:    "fullwidth letters",
		yaml:    "\uff53\uff53\uff48: {hosts: [evil]}\noutput:\n  \uff42ytes: 7\n",
		json:    `{"ｓｓｈ": {"hosts": ["evil"]}, "output": {"ｂytes": 7}}`,
		toml:    "\"ｓｓｈ\" = {hosts = [\"evil\"]}\noutput.\"ｂytes\" = 7\n",
		ignored: []ign{{IgnoredNotAllowed, `"\uff53\uff53\uff48"`}, {IgnoredNotAllowed, `"output.\uff42ytes"`}},
	},
	{
		name:    "a zero-width joiner inside a key",
		yaml:    "s" + zwj + "sh: {hosts: [evil]}\noutput:\n  by" + zwj + "tes: 7\n",
		json:    `{"s` + zwj + `sh": {"hosts": ["evil"]}, "output": {"by` + zwj + `tes": 7}}`,
		toml:    "\"s" + zwj + "sh\" = {hosts = [\"evil\"]}\noutput.\"by" + zwj + "tes\" = 7\n",
		ignored: []ign{{IgnoredNotAllowed, `"s\u200dsh"`}, {IgnoredNotAllowed, `"output.by\u200dtes"`}},
	},
	{
		name: "mixed ASCII case names a project key, never a trusted one",
		yaml: "OUTPUT:\n  Bytes: 100\nShell:\n  AutoEffects: [secret]\n  BLOCKINGBUDGET: 5s\nSSH: {hosts: [evil]}\n",
		json: `{"OUTPUT": {"Bytes": 100}, "Shell": {"AutoEffects": ["secret"], "BLOCKINGBUDGET": "5s"}, "SSH": {"hosts": ["evil"]}}`,
		toml: "[OUTPUT]\nBytes = 100\n[Shell]\nAutoEffects = [\"secret\"]\nBLOCKINGBUDGET = \"5s\"\n[SSH]\nhosts = [\"evil\"]\n",
		want: map[string]any{"output.bytes": 100, "shell.blockingbudget": "5s"},
		ignored: []ign{
			{IgnoredNotAllowed, `"Shell.AutoEffects"`}, {IgnoredNotAllowed, `"SSH"`},
		},
	},
	{
		name:    "a dotted key is the nested one",
		yaml:    "output.bytes: 100\nshell.blockingBudget: 1m30s\nkernelTransport.kind: wrapped\n",
		json:    `{"output.bytes": 100, "shell.blockingBudget": "1m30s", "kernelTransport.kind": "wrapped"}`,
		want:    map[string]any{"output.bytes": 100, "shell.blockingbudget": "1m30s"},
		ignored: []ign{{IgnoredNotAllowed, `"kernelTransport.kind"`}},
	},
	{
		name:    "TOML's dotted keys are its tables",
		toml:    "output.bytes = 100\nshell.blockingBudget = \"1m30s\"\nkernelTransport.kind = \"wrapped\"\n",
		want:    map[string]any{"output.bytes": 100, "shell.blockingbudget": "1m30s"},
		ignored: []ign{{IgnoredNotAllowed, `"kernelTransport"`}},
	},
	{
		name:    "a dotted key over a trusted table",
		yaml:    "output:\n  kernelTransport.kind: wrapped\n",
		json:    `{"output": {"kernelTransport.kind": "wrapped"}}`,
		toml:    "[output]\n\"kernelTransport.kind\" = \"wrapped\"\n",
		ignored: []ign{{IgnoredNotAllowed, `"output.kernelTransport.kind"`}},
	},
	{
		name:    "nested and dotted in one file: neither applies",
		yaml:    "output:\n  bytes: 100\noutput.bytes: 200\n",
		json:    `{"output": {"bytes": 100}, "output.bytes": 200}`,
		toml:    "\"output.bytes\" = 200\n[output]\nbytes = 100\n",
		ignored: []ign{{IgnoredDuplicate, ""}},
	},
	{
		name:    "the same key in two cases: neither applies",
		yaml:    "output:\n  bytes: 100\n  Bytes: 999999\n",
		json:    `{"output": {"bytes": 100, "Bytes": 999999}}`,
		toml:    "[output]\nbytes = 100\nBytes = 999999\n",
		ignored: []ign{{IgnoredDuplicate, ""}},
	},
	{
		name:    "a key given twice as written: neither applies",
		yaml:    "output:\n  mode: head\n  mode: tail\n",
		json:    `{"output": {"mode": "head"}, "output": {"mode": "tail"}}`,
		ignored: []ign{{IgnoredDuplicate, ""}},
	},
	{
		name: "JSON tables given twice with different keys both apply",
		json: `{"output": {"mode": "head"}, "output": {"lines": 9}}`,
		want: map[string]any{"output.mode": "head", "output.lines": 9},
	},
	{
		name:    "a YAML anchor is read where it is used",
		yaml:    "base: &b {bytes: 100, lines: 5}\noutput: *b\n",
		want:    map[string]any{"output.bytes": 100, "output.lines": 5},
		ignored: []ign{{IgnoredNotAllowed, `"base"`}},
	},
	{
		name:    "an anchored trusted table used under a project key",
		yaml:    "x: &t {kernelTransport: {kind: wrapped}, autoEffects: [secret]}\nshell: *t\noutput: *t\n",
		ignored: []ign{{IgnoredNotAllowed, `"x"`}, {IgnoredNotAllowed, `"shell.kernelTransport"`}, {IgnoredNotAllowed, `"shell.autoEffects"`}, {IgnoredNotAllowed, `"output.kernelTransport"`}, {IgnoredNotAllowed, `"output.autoEffects"`}},
	},
	{
		name:    "YAML merge keys are not read",
		yaml:    "<<: {kernelTransport: {kind: wrapped}, ssh: {hosts: [evil]}}\noutput:\n  <<: {bytes: 100}\n",
		ignored: []ign{{IgnoredNotAllowed, `"<<"`}, {IgnoredNotAllowed, `"output.<<"`}},
	},
	{
		name:    "a trusted key smuggled inside a value",
		yaml:    "output:\n  bytes: {kernelTransport: {kind: wrapped}}\n  lines: [{ssh: {hosts: [evil]}}]\nshell: [kernelTransport]\n",
		json:    `{"output": {"bytes": {"kernelTransport": {"kind": "wrapped"}}, "lines": [{"ssh": {"hosts": ["evil"]}}]}, "shell": ["kernelTransport"]}`,
		toml:    "shell = [\"kernelTransport\"]\n[output]\nbytes = {kernelTransport = {kind = \"wrapped\"}}\nlines = [{ssh = {hosts = [\"evil\"]}}]\n",
		ignored: []ign{{IgnoredInvalid, `"output.bytes"`}, {IgnoredInvalid, `"output.lines"`}, {IgnoredInvalid, `"shell"`}},
	},
	{
		name:    "output cannot be unbounded: 0 and negative bounds",
		yaml:    "output: {bytes: 0, lines: -1}\n",
		json:    `{"output": {"bytes": 0, "lines": -1}}`,
		toml:    "output = {bytes = 0, lines = -1}\n",
		ignored: []ign{{IgnoredInvalid, `"output.bytes"`}, {IgnoredInvalid, `"output.lines"`}},
	},
	{
		name:    "output cannot be unbounded: huge bounds",
		yaml:    "output: {bytes: 1099511627776, lines: 99999999999999999999}\n",
		json:    `{"output": {"bytes": 1099511627776, "lines": 99999999999999999999}}`,
		toml:    "output = {bytes = 1099511627776, lines = 100_001}\n",
		ignored: []ign{{IgnoredInvalid, `"output.bytes"`}, {IgnoredInvalid, `"output.lines"`}},
	},
	{
		name:    "the bounds themselves apply",
		yaml:    "output: {bytes: 16777216, lines: 1}\nshell: {blockingBudget: 10m}\n",
		json:    `{"output": {"bytes": 16777216, "lines": 1}, "shell": {"blockingBudget": "10m"}}`,
		toml:    "output = {bytes = 16777216, lines = 1}\nshell = {blockingBudget = \"10m\"}\n",
		want:    map[string]any{"output.bytes": MaxProjectBytes, "output.lines": 1, "shell.blockingbudget": "10m0s"},
		ignored: nil,
	},
	{
		name: "values of the wrong type are ignored, the rest apply",
		yaml: "output: {bytes: \"100\", lines: 2.5, mode: HEAD}\nshell: {blockingBudget: 30}\n",
		json: `{"output": {"bytes": "100", "lines": 2.5, "mode": "HEAD"}, "shell": {"blockingBudget": 30}}`,
		toml: "output = {bytes = \"100\", lines = 2.5, mode = \"HEAD\"}\nshell = {blockingBudget = 30}\n",
		ignored: []ign{
			{IgnoredInvalid, `"output.bytes"`}, {IgnoredInvalid, `"output.lines"`}, {IgnoredInvalid, `"output.mode"`}, {IgnoredInvalid, `"shell.blockingBudget"`},
		},
	},
	{
		name:    "a call cannot be made never to detach",
		yaml:    "shell: {blockingBudget: 0s}\n",
		json:    `{"shell": {"blockingBudget": "-1s"}}`,
		toml:    "shell = {blockingBudget = \"11m\"}\n",
		ignored: []ign{{IgnoredInvalid, `"shell.blockingBudget"`}},
	},
	{
		name:    "null is no value",
		yaml:    "output: ~\nshell: {blockingBudget: null}\n",
		json:    `{"output": null, "shell": {"blockingBudget": null}}`,
		ignored: []ign{{IgnoredInvalid, `"output"`}, {IgnoredInvalid, `"shell.blockingBudget"`}},
	},
	{
		name:    "a file that does not parse is ignored whole",
		yaml:    "output: {bytes: 100\n",
		json:    `{"output": {"bytes": 100}`,
		toml:    "[output\nbytes = 100\n",
		ignored: []ign{{IgnoredUnreadable, ""}},
	},
	{
		name:    "a file that is not a table",
		yaml:    "- kernelTransport\n",
		json:    `["kernelTransport"]`,
		ignored: []ign{{IgnoredUnreadable, ""}},
	},
	{
		name:    "more than one YAML document",
		yaml:    "output: {bytes: 100}\n---\nkernelTransport: {kind: wrapped}\n",
		ignored: []ign{{IgnoredUnreadable, ""}},
	},
	{
		name:    "more after the JSON value",
		json:    `{"output": {"bytes": 100}} {"kernelTransport": {"kind": "wrapped"}}`,
		ignored: []ign{{IgnoredUnreadable, ""}},
	},
	{
		name: "an empty file sets nothing",
		yaml: "", json: " ", toml: "\n",
	},
}

func (c projectCase) bodies() map[string]string {
	out := map[string]string{}
	for ext, body := range map[string]string{"yaml": c.yaml, "json": c.json, "toml": c.toml} {
		if body != "" || c.name == "an empty file sets nothing" {
			out[ext] = body
		}
	}
	return out
}

// Each example in each format: what applies, what is ignored (named as written), and the
// trusted settings Load gives are those it gives without the project's file.
// law: project_never_widens
func TestDecodeProject(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	base, err := load(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range projectCases {
		for ext, body := range c.bodies() {
			t.Run(c.name+"/"+ext, func(t *testing.T) {
				file := "/ws/.paddock/settings." + ext
				p, ignored := DecodeProject(file, []byte(body))
				want := c.want
				if want == nil {
					want = map[string]any{}
				}
				if !reflect.DeepEqual(p.values(), want) {
					t.Errorf("applies %v, want %v", p.values(), want)
				}
				var got []ign
				for _, i := range ignored {
					if i.File != file {
						t.Errorf("ignored names file %q, want %q", i.File, file)
					}
					key := i.Key
					if i.Code() == IgnoredDuplicate || i.Code() == IgnoredUnreadable {
						key = "" // the duplicates' spellings are checked below
					}
					got = append(got, ign{i.Code(), key})
				}
				if !sameIgnored(got, c.ignored) {
					t.Errorf("ignored %v, want %v", ignoredText(ignored), c.ignored)
				}
				l, err := load(Options{}, &projectFile{path: file, data: []byte(body)})
				if err != nil {
					t.Fatalf("a project's file failed Load: %v", err)
				}
				if !reflect.DeepEqual(trustedOf(l.Settings), trustedOf(base.Settings)) {
					t.Errorf("the project changed a trusted setting: %+v", trustedOf(l.Settings))
				}
				if len(l.Warnings) != len(ignored) {
					t.Errorf("warnings %q for %d ignored", l.Warnings, len(ignored))
				}
			})
		}
	}
}

func sameIgnored(got, want []ign) bool {
	if len(got) != len(want) {
		return false
	}
	count := map[ign]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		count[w]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func ignoredText(ig []Ignored) []string {
	var out []string
	for _, i := range ig {
		out = append(out, i.Code()+": "+i.String())
	}
	return out
}

// A setting given more than once is named in each spelling, and none of them applies.
func TestDuplicateNamesEachSpelling(t *testing.T) {
	p, ignored := DecodeProject("s.yaml", []byte("output:\n  bytes: 100\n  BYTES: 200\nOutput.Bytes: 300\n"))
	if p.Output.Bytes != nil || len(ignored) != 1 || ignored[0].Code() != IgnoredDuplicate {
		t.Fatalf("applies %+v, ignored %v", p, ignoredText(ignored))
	}
	for _, k := range []string{`"output.bytes"`, `"output.BYTES"`, `"Output.Bytes"`} {
		if !strings.Contains(ignored[0].Key, k) {
			t.Errorf("%q does not name %s", ignored[0].Key, k)
		}
	}
}

// YAML aliases that would repeat a table many times over are not followed without end: a
// file whose values pass maxProjectValues is ignored whole.
func TestAliasesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("wide: &w {")
	for j := range 2000 {
		b.WriteString("k" + strconv.Itoa(j) + ": 1, ")
	}
	b.WriteString("bytes: 1}\n")
	for range 2000 {
		b.WriteString("output: *w\n")
	}
	if b.Len() > MaxProjectFileBytes {
		t.Fatalf("the file is %d bytes, over what is read", b.Len())
	}
	p, ignored := DecodeProject("s.yaml", []byte(b.String()))
	if len(p.values()) != 0 || len(ignored) != 1 || ignored[0].Code() != IgnoredUnreadable {
		t.Fatalf("applies %v, ignored %d: %.300v", p.values(), len(ignored), ignoredText(ignored))
	}
}

// The project's file is read only when it is a regular file, not through a link, and small:
// a FIFO does not block Load, a device is not read without end, another file is not read.
func TestProjectFileRead(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	write(t, secret, "output: {bytes: 4242}\n")
	for name, plant := range map[string]func(t *testing.T, dir string){
		"a symbolic link": func(t *testing.T, dir string) {
			if err := os.Symlink(secret, filepath.Join(dir, "settings.yaml")); err != nil {
				t.Fatal(err)
			}
		},
		"a link to a device": func(t *testing.T, dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "settings.json")); err != nil {
				t.Fatal(err)
			}
		},
		"a FIFO": func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "settings.yaml"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"too big": func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "settings.yaml"), "output: {bytes: 4242}\n"+strings.Repeat("#\n", MaxProjectFileBytes))
		},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			dir := filepath.Join(ws, ".paddock")
			os.Mkdir(dir, 0o700)
			plant(t, dir)
			l, err := Load(Options{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			if l.Settings.Output.Bytes == 4242 || len(l.Ignored) != 1 || l.Ignored[0].Code() != IgnoredUnreadable {
				t.Fatalf("output %+v, ignored %v", l.Settings.Output, ignoredText(l.Ignored))
			}
		})
	}
	t.Run("a linked .paddock", func(t *testing.T) {
		ws := t.TempDir()
		write(t, filepath.Join(filepath.Dir(secret), "settings.yaml"), "output: {bytes: 4242}\n")
		if err := os.Symlink(filepath.Dir(secret), filepath.Join(ws, ".paddock")); err != nil {
			t.Fatal(err)
		}
		l, err := Load(Options{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if l.Settings.Output.Bytes == 4242 || len(l.Ignored) != 1 || l.Ignored[0].Code() != IgnoredUnreadable {
			t.Fatalf("output %+v, ignored %v", l.Settings.Output, ignoredText(l.Ignored))
		}
	})
}
