package ssh

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		user string
		host string
		port int
		bad  bool
	}{
		{in: "box", host: "box"},
		{in: "me@box", user: "me", host: "box"},
		{in: "me@box:2222", user: "me", host: "box", port: 2222},
		{in: "a@b@box", user: "a@b", host: "box"},
		{in: "[::1]:22", host: "::1", port: 22},
		{in: "[::1]", host: "::1"},
		{in: "[]", bad: true},
		{in: "[a]]", bad: true},
		{in: "::1", host: "::1"},
		{in: "box:0", bad: true},
		{in: "box:x", bad: true},
		{in: "box:70000", bad: true},
		{in: "@box", bad: true},
		{in: "me@", bad: true},
		{in: "", bad: true},
		{in: "-oProxyCommand=x", bad: true},
		{in: "bo x", bad: true},
		{in: "box\n", bad: true},
	} {
		u, h, p, err := splitName(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %q %q %d", tc.in, u, h, p)
			}
			continue
		}
		if err != nil || u != tc.user || h != tc.host || p != tc.port {
			t.Errorf("%q: %q %q %d %v; want %q %q %d", tc.in, u, h, p, err, tc.user, tc.host, tc.port)
		}
	}
}

func TestResolveFromConfig(t *testing.T) {
	dir := t.TempDir()
	id := filepath.Join(dir, "id_box")
	os.WriteFile(id, []byte("key"), 0o600)
	kh := filepath.Join(dir, "kh")
	os.WriteFile(kh, nil, 0o600)
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`Host box
  HostName %h.example
  User builder
  Port 2200
  IdentityFile %d/id_%n
  IdentityFile ~/missing
  IdentitiesOnly yes
  UserKnownHostsFile ~/kh ~/absent
  ConnectTimeout 7

Host jumpy
  ProxyJump gate

Host *
  User nobody
  Port 22
`), 0o600)
	d := &Dialer{ConfigFile: cfg, Home: dir, User: "local", AgentSocket: "none"}
	got, err := d.Resolve("box")
	if err != nil {
		t.Fatal(err)
	}
	want := &Target{Name: "box", Alias: "box", User: "builder", HostName: "box.example", Port: 2200,
		IdentityFiles: []string{id}, IdentitiesOnly: true, KnownHosts: []string{kh}, ConnectTimeout: 7 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// What the name says wins over the configuration.
	got, err = d.Resolve("root@box:22")
	if err != nil || got.User != "root" || got.Port != 22 || got.Addr() != "box.example:22" {
		t.Fatalf("got %+v %v", got, err)
	}
	// Another host: the catch-all block and the defaults.
	got, err = d.Resolve("other")
	if err != nil || got.User != "nobody" || got.Port != 22 || got.HostName != "other" || got.IdentitiesOnly {
		t.Fatalf("got %+v %v", got, err)
	}
	// A host reached through another is refused rather than dialled directly.
	if _, err := d.Resolve("jumpy"); CodeOf(err) != CodeConfig {
		t.Fatalf("ProxyJump: %v", err)
	}
	if _, err := d.Resolve("bad:port"); CodeOf(err) != CodeConfig {
		t.Fatalf("bad port: %v", err)
	}
	d.ConfigFile = filepath.Join(dir, "nope")
	if _, err := d.Resolve("box"); CodeOf(err) != CodeConfig {
		t.Fatalf("a configuration file named but missing: %v", err)
	}
}

func TestExpandTokens(t *testing.T) {
	tok := tokens{home: "/h", local: "lu", host: "h.ex", user: "ru", alias: "al", port: 22}
	for in, want := range map[string]string{
		"%d/.ssh/id_%r": "/h/.ssh/id_ru",
		"%h:%p %n %u":   "h.ex:22 al lu",
		"100%%":         "100%",
		"%z":            "%z",
		"end%":          "end%",
	} {
		if got := expandTokens(in, tok); got != want {
			t.Errorf("%q: %q; want %q", in, got, want)
		}
	}
	if got := expandPath("~/.ssh/x", tok); got != "/h/.ssh/x" {
		t.Errorf("~: %q", got)
	}
}

// Quote against the real shell: for random strings, printf '%s' QUOTED prints the string.
func TestQuoteDifferential(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab '\"$`\\;|&()<>*?[]{}~#!\t\n-=%é\x01")
	var words []string
	for i := 0; i < 200; i++ {
		n := r.IntN(12)
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		words = append(words, b.String())
	}
	words = append(words, "$(touch /tmp/paddock-quote-x)", "'", "''", "`id`")
	var script strings.Builder
	for _, w := range words {
		script.WriteString("printf '%s\\0' " + Quote(w) + "\n")
	}
	out, err := exec.Command(sh, "-c", script.String()).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !reflect.DeepEqual(got, words) {
		t.Fatalf("the shell read the words differently:\n%q\n%q", got, words)
	}
}

func TestKernelCommand(t *testing.T) {
	got := kernelCommand("/w d", []string{"PATH=/bin", "X=a'b", "noequals", "-i=x", "=v"}, "/k/paddock-kernel", []string{"-grace", "1s"})
	want := `cd '/w d' && exec env -i 'PATH=/bin' 'X=a'\''b' '/k/paddock-kernel' '-grace' '1s'`
	if got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

func TestGoArch(t *testing.T) {
	for m, want := range map[string]string{"x86_64\n": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm", "riscv64": "riscv64", "sparc64": "", "": ""} {
		if got := goArch(m); got != want {
			t.Errorf("%q: %q; want %q", m, got, want)
		}
	}
}

func TestCacheDir(t *testing.T) {
	for in, want := range map[string]string{"": "/h/.cache/paddock/kernel", "~/k": "/h/k", "rel/k": "/h/rel/k", "/abs/k/": "/abs/k", "~": "/h"} {
		if got := cacheDir(in, "/h"); got != want {
			t.Errorf("%q: %q; want %q", in, got, want)
		}
	}
}

// Host names come from settings and flags: whatever they hold, a name splits into a user,
// a host that cannot pass for an option, and a port in range, or is refused.
func FuzzSplitName(f *testing.F) {
	for _, s := range []string{"box", "me@box:22", "[::1]:2222", "a@b@c", "-oProxyCommand=x", "box:", "@", "[x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		user, host, port, err := splitName(name)
		if err != nil {
			return
		}
		if host == "" || strings.HasPrefix(host, "-") || strings.ContainsAny(host, " \t\n\r\x00") {
			t.Fatalf("%q: host %q", name, host)
		}
		if strings.ContainsAny(user, " \t\n\r\x00") {
			t.Fatalf("%q: user %q", name, user)
		}
		if port < 0 || port > 65535 {
			t.Fatalf("%q: port %d", name, port)
		}
		if user != "" && !strings.HasPrefix(name, user+"@") {
			t.Fatalf("%q: user %q is not its start", name, user)
		}
	})
}
