package egress

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// FuzzRequestTarget feeds a sandbox's bytes to the proxy's reading of a request: whatever
// they are, a target comes out only with a port from 1 to 65535 and a host that is a valid
// name (no zone, no numeric forms) or an address, and a rule written for that target holds it.
func FuzzRequestTarget(f *testing.F) {
	for _, s := range []string{
		"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n",
		"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"CONNECT [::1]:80 HTTP/1.1\r\n\r\n",
		"CONNECT 127.1:80 HTTP/1.1\r\n\r\n",
		"GET http://[fe80::1%25eth0]:80/ HTTP/1.1\r\n\r\n",
		"CONNECT 0x7f.1:80 HTTP/1.1\r\n\r\n",
		"GET http://user:pass@10.0.0.1:8080/ HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		tg, no := RequestTarget(r)
		if no != nil {
			if no.Code == "" || no.Status < 400 {
				t.Fatalf("refusal without a code: %+v", no)
			}
			return
		}
		if tg.Port == 0 {
			t.Fatalf("port 0: %+v", tg)
		}
		if tg.Addr.IsValid() == (tg.Host != "") {
			t.Fatalf("a target is a name or an address: %+v", tg)
		}
		if tg.Host != "" {
			if err := checkName(tg.Host); err != nil || tg.Host != strings.ToLower(tg.Host) || strings.HasSuffix(tg.Host, ".") {
				t.Fatalf("host %q: %v", tg.Host, err)
			}
		}
		if tg.Addr.Zone() != "" || tg.Addr.Is4In6() {
			t.Fatalf("address %v", tg.Addr)
		}
		rule, err := ParseRule(tg.String())
		if err != nil {
			t.Fatalf("the target %s does not read as a rule: %v", tg, err)
		}
		if d := Decide([]Rule{rule}, nil, tg); d.Verdict != Allow {
			t.Fatalf("rule %s does not hold %s", rule, tg)
		}
		back, err := ParseTarget(tg.String(), 0)
		if err != nil || back != tg {
			t.Fatalf("%s reads back as %+v, %v", tg, back, err)
		}
	})
}

// FuzzParseRule: every entry either is refused or reads back as itself, its String a rule
// that parses to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"github.com", "*.golang.org:443", "10.0.0.5:5432", "10.0.0.0/8", "[::1]:80", "::1", "a_b.c:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		back, err := ParseRule(r.String())
		if err != nil || back != r {
			t.Fatalf("%q -> %s -> %+v, %v", s, r, back, err)
		}
	})
}
