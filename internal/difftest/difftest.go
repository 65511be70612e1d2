// Package difftest holds the differential tests' scripts and the files they run on: the
// CLI checks them against bash on the host, the integration tests across engines and
// runtimes.
package difftest

import (
	"os"
	"path/filepath"
)

// Files are the fixture's files, by path.
var Files = map[string]string{
	"a.txt":          "alpha\nbeta\ngamma\n",
	"b.txt":          "one\ntwo\nthree\nfour\n",
	"c.go":           "package c\n",
	"with space.txt": "spaced\n",
	".hidden":        "hidden\n",
	"sub/d.txt":      "delta\n",
	"sub/e.md":       "# e\n",
	"nums":           "3\n1\n2\n10\n",
}

// Fixture writes Files into dir, which it empties first.
func Fixture(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	for name, body := range Files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Scripts are within the grammar; each must give the same stdout, stderr and exit status
// through Paddock as through bash -c in the same directory (Fixture), or the same in two
// sandboxes.
var Scripts = []string{
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
