package sshfile

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want URL
		code string
	}{
		{in: "ssh://box/etc/hosts", want: URL{Host: "box", Path: "/etc/hosts"}},
		{in: "ssh://me@box.example/a//b/./c/", want: URL{Host: "me@box.example", Path: "/a/b/c"}},
		{in: "ssh://b_1-x/", want: URL{Host: "b_1-x", Path: "/"}},
		{in: "ssh://box/~", want: URL{Host: "box", Home: true, Path: ""}},
		{in: "ssh://box/~/notes/x.md", want: URL{Host: "box", Home: true, Path: "notes/x.md"}},
		{in: "ssh://box/~x/y", want: URL{Host: "box", Path: "/~x/y"}},
		{in: "ssh://box/a/~/b", want: URL{Host: "box", Path: "/a/~/b"}},
		{in: "ssh://box//~/b", want: URL{Host: "box", Path: "/~/b"}},
		{in: "ssh://box/a/../b", want: URL{Host: "box", Path: "/b"}},
		{in: "ssh://box/~/a/..", want: URL{Host: "box", Home: true, Path: ""}},
		{in: "ssh://box/$(touch /tmp/x);'q'\"", want: URL{Host: "box", Path: "/$(touch /tmp/x);'q'\""}},
		{in: "ssh://box/a%2F..", want: URL{Host: "box", Path: "/a%2F.."}},
		{in: "ssh://box/..", code: Escapes},
		{in: "ssh://box/a/../../etc", code: Escapes},
		{in: "ssh://box/~/..", code: Escapes},
		{in: "ssh://box/~/a/../../b", code: Escapes},
		{in: "ssh://box", code: Arguments},
		{in: "ssh:///etc", code: Arguments},
		{in: "ssh://-oProxyCommand=x/etc", code: Arguments},
		{in: "ssh://box:22/etc", code: Arguments},
		{in: "ssh://bo x/etc", code: Arguments},
		{in: "ssh://box;id/etc", code: Arguments},
		{in: "ssh://box$(id)/etc", code: Arguments},
		{in: "ssh://box/a\x00b", code: Arguments},
		{in: "SSH://box/etc", code: Arguments},
		{in: "/etc/hosts", code: Arguments},
		{in: "ssh:/box/etc", code: Arguments},
	} {
		got, err := Parse(tc.in)
		if tc.code != "" {
			if !errors.Is(err, &Rejection{Code: tc.code}) {
				t.Errorf("%q: %+v %v; want %s", tc.in, got, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// law: path_rejects_escape
// law: path_resolves_inside
// For random paths of "..", ".", "", "~" and names: rejected as escapes exactly when the
// ".." go above the root, never clamped; otherwise the path resolves under its root to
// what a stack of its segments gives.
func TestParseEscapeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	segs := []string{"..", ".", "", "~", "a", "b c", "$(x)"}
	for i := 0; i < 20000; i++ {
		n := r.IntN(8)
		parts := make([]string, n)
		for j := range parts {
			parts[j] = segs[r.IntN(len(segs))]
		}
		raw := "ssh://box/" + strings.Join(parts, "/")
		u, err := Parse(raw)
		low := depthLow(raw)
		if low < 0 {
			if !errors.Is(err, &Rejection{Code: Escapes}) {
				t.Fatalf("%q goes above its root: %+v %v", raw, u, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		home := n > 0 && parts[0] == "~"
		rest := parts
		if home {
			rest = parts[1:]
		}
		var stack []string
		for _, p := range rest {
			switch p {
			case "", ".":
			case "..":
				stack = stack[:len(stack)-1]
			default:
				stack = append(stack, p)
			}
		}
		want := strings.Join(stack, "/")
		if !home {
			want = "/" + want
		}
		if u.Home != home || u.Path != want {
			t.Fatalf("%q: %+v; want home %v path %q", raw, u, home, want)
		}
	}
}

// Above the root: rejected, never clamped; under it: resolves, and the canonical form
// parses back to itself. Checked on every input the fuzzer finds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"ssh://box/etc/hosts", "ssh://me@b/~/x/../y", "ssh://b/../x", "ssh://b/~/..", "ssh://-x/y", "ssh://b/a/./b//c/..", "ssh://b/$(touch /tmp/x)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := Parse(raw)
		if err != nil {
			var r *Rejection
			if !errors.As(err, &r) || (r.Code != Arguments && r.Code != Escapes) {
				t.Fatalf("%q: %v is not an arguments or escapes rejection", raw, err)
			}
			if r.Code == Escapes && depthLow(raw) >= 0 {
				t.Fatalf("%q: rejected as escaping but never goes above its root", raw)
			}
			return
		}
		if depthLow(raw) < 0 {
			t.Fatalf("%q: goes above its root but parsed as %+v", raw, u)
		}
		if !ValidHost(u.Host) {
			t.Fatalf("%q: host %q", raw, u.Host)
		}
		for _, s := range strings.Split(u.Path, "/") {
			if s == ".." || s == "." {
				t.Fatalf("%q: path %q keeps %q", raw, u.Path, s)
			}
		}
		if !u.Home && !strings.HasPrefix(u.Path, "/") || u.Home && strings.HasPrefix(u.Path, "/") {
			t.Fatalf("%q: path %q has the wrong root", raw, u.Path)
		}
		again, err := Parse(u.String())
		if err != nil || again != u {
			t.Fatalf("%q: canonical %q parses to %+v %v", raw, u.String(), again, err)
		}
	})
}

// depthLow is the lowest depth the path of raw reaches below its root, counted on its own:
// below 0, it goes above the root. Only for URLs with a valid host and a path.
func depthLow(raw string) int {
	rest := strings.TrimPrefix(raw, Scheme)
	_, p, _ := strings.Cut(rest, "/")
	segs := strings.Split(p, "/")
	if segs[0] == "~" {
		segs = segs[1:]
	}
	d, low := 0, 0
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..":
			d--
		default:
			d++
		}
		low = min(low, d)
	}
	return low
}
