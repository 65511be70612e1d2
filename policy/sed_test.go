package policy

import (
	"bytes"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

func TestSedSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		safe   bool
	}{
		{"p", true},
		{"", true},
		{"P;D;d;=;n;N;g;G;h;H;x", true},
		{"q", true},
		{"q5", true},
		{"Q 3", true},
		{"s/a/b/", true},
		{"s/a/b/g", true},
		{"s/a/b/gIimMp2", true},
		{"s|a/b|c|", true},
		{`s/a\/b/c\/d/`, true},
		{"s/a/b\\\nc/", true}, // an escaped newline in the replacement
		{"y/abc/xyz/", true},
		{"1p", true},
		{"$p", true},
		{"/re/p", true},
		{"/re/Ip", true},
		{"/re/!d", true},
		{"1,5p", true},
		{"0,/re/d", true},
		{"/a/,/b/{s/x/y/;p}", true},
		{"1!{p;}", true},
		{"1 ! p", true},
		{"{p};{d}", true},
		{"p\np\n", true},
		{"#n\np", true},
		{"p # comment", true},
		{"  p  ;  ", true},
		// Not known-safe.
		{"e id", false},
		{"s/a/b/e", false},
		{"s/a/b/w out", false},
		{"s/a/b/gw out", false},
		{"w out", false},
		{"W out", false},
		{"r /etc/passwd", false},
		{"R f", false},
		{"a text", false},
		{"i text", false},
		{"c text", false},
		{"b end", false},
		{":end", false},
		{"t", false},
		{"T", false},
		{"l", false},
		{"z", false},
		{"F", false},
		{"1~2p", false},
		{"1,+2p", false},
		{"1,~4p", false},
		{`\%re%p`, false},
		{"{p", false},
		{"p}", false},
		{"s/a/b", false},
		{"s/a", false},
		{"s\\a\\b\\", false},
		{"s/a/b/x", false},
		{"s/a/b/gg", false},
		{"s/a/b/pp", false},
		{"s/a/b/1g2", false},
		{"s/a/b/0", false},
		{"0p", false},
		{"00,/x/p", true},
		{"y/a/b", false},
		{"/re", false},
		{"pp", false},
		{"p x", false},
		{"q x", false},
		{"1!!p", false},
		{"s/a\nb/c/", false},
	} {
		if got := SedSafe(tc.script); got != tc.safe {
			t.Errorf("SedSafe(%q) = %v, want %v", tc.script, got, tc.safe)
		}
	}
}

func TestSedArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line    string
		scripts []string
		files   []string
		inPlace bool
		ok      bool
	}{
		{"-n p f", []string{"p"}, []string{"f"}, false, true},
		{"-e p -e d f g", []string{"p", "d"}, []string{"f", "g"}, false, true},
		{"--expression=p f", []string{"p"}, []string{"f"}, false, true},
		{"-ne p f", []string{"p"}, []string{"f"}, false, true},
		{"-i s/a/b/ f", []string{"s/a/b/"}, []string{"f"}, true, true},
		{"-i.bak s/a/b/ f", []string{"s/a/b/"}, []string{"f"}, true, true},
		{"-ni s/a/b/ f", []string{"s/a/b/"}, []string{"f"}, true, true},
		{"-ie s/a/b/ f", []string{"s/a/b/"}, []string{"f"}, true, true},
		{"--in-place=.bak -E -r -s -u -z --quiet --silent --regexp-extended --separate --unbuffered --null-data s/a/b/ f", []string{"s/a/b/"}, []string{"f"}, true, true},
		{"p -- -f", []string{"p"}, []string{"-f"}, false, true},
		{"-f script f", nil, nil, false, false},
		{"--file=script f", nil, nil, false, false},
		{"-l 5 p", nil, nil, false, false},
		{"--posix p", nil, nil, false, false},
		{"--sandbox p", nil, nil, false, false},
		{"--follow-symlinks p", nil, nil, false, false},
		{"--version", nil, nil, false, false},
	} {
		scripts, files, inPlace, ok := sedArgs(strings.Fields(tc.line))
		if ok != tc.ok || (ok && (strings.Join(scripts, "|") != strings.Join(tc.scripts, "|") ||
			strings.Join(files, "|") != strings.Join(tc.files, "|") || inPlace != tc.inPlace)) {
			t.Errorf("sed %s: %q %q %v %v", tc.line, scripts, files, inPlace, ok)
		}
	}
}

// requirePeer skips a test that needs a program this machine lacks, unless
// PADDOCK_REQUIRE_INTEGRATION=1 makes the lack a failure.
func requirePeer(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	peer.Missing(t, "%s", why)
}

// randomSed draws a script from safe and unsafe pieces.
func randomSed(r *rand.Rand) string {
	pieces := []string{"p", "d", "P", "D", "=", "n", "N", "g", "G", "h", "H", "x", "q", "Q 2",
		"s/a/b/", "s|x|y|g", "s/a/b/2p", "s/a/b/I", "y/ab/cd/", "1", "$", "/re/", "/a/I", "!",
		",", "{", "}", ";", "\n", " ", "#c\n", "w f", "e id", "r f", "s/a/b/e", "s/a/b/w f",
		"a x", "b", ":l", "l", "z", "1~2", "\\", "/", "s", "0", "5"}
	var b strings.Builder
	for i := r.IntN(8); i >= 0; i-- {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// Every script SedSafe accepts is one GNU sed accepts in sandbox mode (which refuses e, r
// and w): the checker never calls safe what sed would read as file or program access.
func TestSedSafeAgreesWithGNUSandbox(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("sed", "--sandbox", "-n", "p").CombinedOutput()
	requirePeer(t, err == nil, "GNU sed with --sandbox is not installed: "+string(out))
	r := rand.New(rand.NewPCG(7, 7))
	accepted := 0
	for i := 0; i < 3000 && accepted < 300; i++ {
		s := randomSed(r)
		if !SedSafe(s) {
			continue
		}
		accepted++
		cmd := exec.Command("sed", "--sandbox", "-n", "-e", s)
		cmd.Stdin = strings.NewReader("a\nb\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// q and Q end with their own exit status, saying nothing.
		if err := cmd.Run(); err != nil && stderr.Len() > 0 {
			t.Errorf("SedSafe(%q) is true, but sed --sandbox says %v: %s", s, err, stderr.String())
		}
	}
	if accepted < 100 {
		t.Fatalf("only %d random scripts were safe: the generator misses cases", accepted)
	}
}
