package egress

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in, out string
	}{
		{"github.com", "github.com"},
		{"GitHub.COM.", "github.com"},
		{"*.golang.org:443", "*.golang.org:443"},
		{"10.0.0.5:5432", "10.0.0.5:5432"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"::1", "::1"},
		{"[::1]:8080", "[::1]:8080"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"localhost:65535", "localhost:65535"},
		{"my_host.internal", "my_host.internal"},
	} {
		r, err := ParseRule(c.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", c.in, err)
			continue
		}
		if r.String() != c.out {
			t.Errorf("ParseRule(%q) = %s, want %s", c.in, r, c.out)
		}
	}
	for _, bad := range []string{"", ":443", "github.com:", "github.com:0", "github.com:65536", "github.com:+1",
		"github.com:0x1bb", "a..b", "-a.com", "a-.com", "a b", "http://github.com", "[::1", "[::1]x", "[10.0.0.1]:1",
		"127.1", "0177.0.0.1", "2130706433", "0x7f.1", "10.0.0.0/33", "*.", "*.*.com", "a@b", "[::1]:", "é.com"} {
		if r, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) = %s, want an error", bad, r)
		}
	}
}

func TestParseRulesLists(t *testing.T) {
	rs, err := ParseRules([]string{"github.com, *.golang.org:443", "", " 10.0.0.5:5432 ,"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if len(got) != 3 || got[0] != "github.com" || got[1] != "*.golang.org:443" || got[2] != "10.0.0.5:5432" {
		t.Fatalf("ParseRules = %q", got)
	}
}

func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		in   string
		def  uint16
		want string
	}{
		{"github.com:443", 0, "github.com:443"},
		{"GITHUB.com.:443", 0, "github.com:443"},
		{"example.com", 80, "example.com:80"},
		{"[::1]:8080", 0, "[::1]:8080"},
		{"[::ffff:10.0.0.1]:80", 0, "10.0.0.1:80"},
		{"127.0.0.1:9", 0, "127.0.0.1:9"},
	} {
		got, err := ParseTarget(c.in, c.def)
		if err != nil || got.String() != c.want {
			t.Errorf("ParseTarget(%q, %d) = %v, %v; want %s", c.in, c.def, got, err, c.want)
		}
	}
	for _, bad := range []string{"github.com", "github.com:0", ":443", "[fe80::1%eth0]:80", "a:b:c", "127.1:80", "x:99999", ""} {
		if got, err := ParseTarget(bad, 0); err == nil {
			t.Errorf("ParseTarget(%q) = %v, want an error", bad, got)
		}
	}
}

func mustRules(t *testing.T, entries ...string) []Rule {
	t.Helper()
	rs, err := ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func target(t *testing.T, s string) Target {
	t.Helper()
	tg, err := ParseTarget(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestDecide(t *testing.T) {
	allow := mustRules(t, "github.com", "*.golang.org:443", "10.0.0.5:5432", "192.168.0.0/16")
	deny := mustRules(t, "evil.golang.org", "10.0.0.5:22")
	for _, c := range []struct {
		target string
		want   Verdict
	}{
		{"github.com:443", Allow},
		{"github.com:22", Allow},
		{"api.github.com:443", Ask}, // a name rule holds that name only
		{"proxy.golang.org:443", Allow},
		{"a.b.golang.org:443", Allow},
		{"golang.org:443", Ask}, // *.d holds the names under d, not d
		{"proxy.golang.org:80", Ask},
		{"evil.golang.org:443", Deny}, // deny wins
		{"10.0.0.5:5432", Allow},
		{"10.0.0.5:22", Deny},
		{"10.0.0.6:5432", Ask},
		{"192.168.7.7:1", Allow},
		{"xgithub.com:443", Ask},
		{"github.com.evil.net:443", Ask},
	} {
		if got := Decide(allow, deny, target(t, c.target)).Verdict; got != c.want {
			t.Errorf("Decide(%s) = %v, want %v", c.target, got, c.want)
		}
	}
}

func TestGlobal(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.1.1.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"0.0.0.0", "0.1.2.3", "255.255.255.255", "224.0.0.1", "240.0.0.1", "198.18.0.1", "::1", "::", "fe80::1",
		"fc00::1", "fd00:ec2::254", "ff02::1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1",
		"2002:7f00:1::1", "2002:a9fe:a9fe::1", "::127.0.0.1", "2001:db8::1", "2001::1", "192.0.2.1"} {
		if Global(netip.MustParseAddr(s)) {
			t.Errorf("Global(%s) = true, want false", s)
		}
	}
	for _, s := range []string{"1.1.1.1", "140.82.112.3", "2606:4700::1111", "64:ff9b::101:101", "2002:101:101::1"} {
		if !Global(netip.MustParseAddr(s)) {
			t.Errorf("Global(%s) = false, want true", s)
		}
	}
}

func TestDialable(t *testing.T) {
	allow := mustRules(t, "localhost:8080", "127.0.0.1:8443", "fd00::/8")
	deny := mustRules(t, "1.2.3.4")
	for _, c := range []struct {
		addr string
		port uint16
		want Refusal
	}{
		{"1.1.1.1", 443, ""},
		{"1.2.3.4", 443, Denied},
		{"127.0.0.1", 8080, Reserved}, // allowed by name (localhost), never by address
		{"127.0.0.1", 8443, ""},
		{"127.0.0.1", 8444, Reserved},
		{"::ffff:127.0.0.1", 8443, ""},
		{"169.254.169.254", 80, Reserved},
		{"fd00:ec2::254", 80, ""}, // named by the range fd00::/8
	} {
		if got := Dialable(allow, deny, netip.MustParseAddr(c.addr), c.port); got != c.want {
			t.Errorf("Dialable(%s, %d) = %q, want %q", c.addr, c.port, got, c.want)
		}
	}
}

// law: egress_reserved_needs_address — for random addresses and random name rules, a
// non-global address is dialable only when an allow rule holds it by address; a deny rule
// that holds an address always refuses it.
func TestDialableLaw(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr {
		switch r.IntN(4) {
		case 0:
			return netip.AddrFrom4([4]byte{127, byte(r.IntN(3)), 0, byte(r.IntN(3))})
		case 1:
			return netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(4)), byte(r.IntN(4))})
		case 2:
			return netip.AddrFrom4([4]byte{169, 254, byte(r.IntN(256)), byte(r.IntN(256))})
		}
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(3))
		}
		b[0] = []byte{0xfd, 0x20, 0x64, 0xfe}[r.IntN(4)]
		return netip.AddrFrom16(b)
	}
	rule := func() Rule {
		switch r.IntN(3) {
		case 0:
			return Rule{Name: "x" + string(rune('a'+r.IntN(3))) + ".com", Port: uint16(r.IntN(3))}
		case 1:
			a := addr()
			return Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: uint16(r.IntN(3))}
		}
		a := addr()
		p, _ := a.Prefix(a.BitLen() - r.IntN(9))
		return Rule{Prefix: p, Port: uint16(r.IntN(3))}
	}
	for i := 0; i < 20000; i++ {
		var allow, deny []Rule
		for range r.IntN(4) {
			allow = append(allow, rule())
		}
		for range r.IntN(2) {
			deny = append(deny, rule())
		}
		a, port := addr(), uint16(r.IntN(3))
		got := Dialable(allow, deny, a, port)
		held := func(rs []Rule) bool {
			for _, x := range rs {
				if x.ByAddress() && (x.Port == 0 || x.Port == port) && x.Prefix.Contains(a) {
					return true
				}
			}
			return false
		}
		switch {
		case held(deny):
			if got != Denied {
				t.Fatalf("%s:%d denied by %v, got %q", a, port, deny, got)
			}
		case !Global(a) && !held(allow):
			if got != Reserved {
				t.Fatalf("%s:%d reserved, allow %v: got %q", a, port, allow, got)
			}
		default:
			if got != "" {
				t.Fatalf("%s:%d: got %q, allow %v", a, port, got, allow)
			}
		}
	}
}

// law: egress_deny_wins — whatever the allow list holds, a target a deny rule holds is
// denied, and an Allow comes only from an allow rule that holds the target.
func TestDecideLaw(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	names := []string{"a.com", "b.a.com", "c.b.a.com", "a.org", "10.0.0.1", "10.0.0.2", "[::1]"}
	entry := func() string {
		n := names[r.IntN(len(names))]
		if n[0] != '1' && n[0] != '[' && r.IntN(2) == 0 {
			n = "*." + n
		}
		if r.IntN(2) == 0 || n[0] == '[' {
			if n[0] == '[' {
				return n + ":" + []string{"1", "2"}[r.IntN(2)]
			}
			n += ":" + []string{"1", "2"}[r.IntN(2)]
		}
		return n
	}
	for i := 0; i < 20000; i++ {
		var allow, deny []Rule
		for range r.IntN(4) {
			allow = append(allow, mustRules(t, entry())...)
		}
		for range r.IntN(3) {
			deny = append(deny, mustRules(t, entry())...)
		}
		tg := target(t, names[r.IntN(len(names))]+":"+[]string{"1", "2"}[r.IntN(2)])
		d := Decide(allow, deny, tg)
		inDeny, inAllow := false, false
		for _, x := range deny {
			inDeny = inDeny || x.matches(tg)
		}
		for _, x := range allow {
			inAllow = inAllow || x.matches(tg)
		}
		want := Ask
		if inDeny {
			want = Deny
		} else if inAllow {
			want = Allow
		}
		if d.Verdict != want {
			t.Fatalf("Decide(%v, %v, %s) = %v, want %v", allow, deny, tg, d.Verdict, want)
		}
	}
}
