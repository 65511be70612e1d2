package policy

import (
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/script"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"ls", "-la", "src/main.go"}, "ls -la src/main.go"},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"echo", "a b"}, "echo 'a b'"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"echo", "$HOME", "*.go", "~", "#x", "a;b", "{a,b}"}, `echo '$HOME' '*.go' '~' '#x' 'a;b' '{a,b}'`},
		{[]string{"X=1", "a=b"}, "'X=1' a=b"},
		{[]string{"if", "then"}, "'if' then"},
		{[]string{"echo", "a\nb"}, `echo $'a\x0ab'`},
		{[]string{"echo", "tab\there"}, `echo $'tab\x09here'`},
		{[]string{"echo", "\x1b[31mred"}, `echo $'\x1b[31mred'`},
		{[]string{"echo", "abc\u202edef"}, `echo $'abc\xe2\x80\xaedef'`}, // right-to-left override
		{[]string{"echo", "a\u200bb"}, `echo $'a\xe2\x80\x8bb'`},         // zero-width space
		{[]string{"echo", "a\u2066b\u2069"}, `echo $'a\xe2\x81\xa6b\xe2\x81\xa9'`},
		{[]string{"echo", "\xff'\\"}, `echo $'\xff\'\\'`},
		{[]string{"echo", "héllo wörld"}, "echo 'héllo wörld'"},
	} {
		if got := Quote(tc.argv); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}

// unquote reads a quoted command line back into its words, as bash would.
func unquote(t testing.TB, line string) ([]string, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 {
		return nil, false
	}
	var out []string
	for _, w := range call.Args {
		s, ok := script.Literal(w)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// randomWord draws a word from an alphabet of shell syntax, control and bidi characters,
// and invalid bytes.
func randomWord(r *rand.Rand) string {
	alphabet := []string{"a", "Z", "0", "-", "/", ".", "=", " ", "'", "\"", "\\", "$", "`", "*", "?",
		"[", "]", "{", "}", "~", "#", "!", ";", "&", "|", "<", ">", "(", ")", "\n", "\t", "\r",
		"\x01", "\x7f", "\u0085", "\u202e", "\u2066", "\u200b", "\u00a0", "\u2028", "\xff", "\xe2\x80",
		"é", "日", "%", "@", "+", ":", ",", "^", "if", "x\\", "$'", "\\x41"}
	var b strings.Builder
	for i := r.IntN(6); i > 0; i-- {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// law: Quote — parsing the quoted form gives back the words.
func TestQuoteRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		argv := make([]string, 1+r.IntN(4))
		for j := range argv {
			argv[j] = randomWord(r)
		}
		q := Quote(argv)
		back, ok := unquote(t, q)
		if !ok || !equalStrings(back, argv) {
			t.Fatalf("Quote(%q) = %s, read back as %q (%v)", argv, q, back, ok)
		}
		if !utf8.ValidString(q) {
			t.Fatalf("Quote(%q) = %q is not UTF-8", argv, q)
		}
		for _, c := range q {
			if invisible(c, utf8.RuneLen(c)) {
				t.Fatalf("Quote(%q) = %q shows an invisible character %U", argv, q, c)
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The real bash reads Quote's output back to the same words (under the C locale too, where
// \u escapes would not decode: Quote writes bytes).
func TestQuoteThroughBash(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("bash")
	requirePeer(t, err == nil, "bash is not installed")
	r := rand.New(rand.NewPCG(5, 6))
	var lines []string
	var want [][]string
	for i := 0; i < 300; i++ {
		argv := []string{"printf", "%s\\0"}
		for j := r.IntN(4); j >= 0; j-- {
			argv = append(argv, randomWord(r))
		}
		lines = append(lines, Quote(argv)+"; printf '<end-of-line>'")
		want = append(want, argv[2:])
	}
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", strings.Join(lines, "\n"))
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "<end-of-line>"), "<end-of-line>")
	if len(got) != len(want) {
		t.Fatalf("%d lines back, want %d", len(got), len(want))
	}
	for i := range want {
		words := strings.Split(strings.TrimSuffix(got[i], "\x00"), "\x00")
		if got[i] == "" {
			words = nil
		}
		// printf %s\0 with an empty word list prints one empty word.
		if !equalStrings(words, want[i]) && !(len(want[i]) == 0 && len(words) == 1 && words[0] == "") {
			t.Errorf("%s\nbash read %q, want %q", lines[i], words, want[i])
		}
	}
}
