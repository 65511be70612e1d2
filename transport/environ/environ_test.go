package environ

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport/pathmap"
)

// credentialRE is the test's own statement of what a credential's name holds.
var credentialRE = regexp.MustCompile(`(?i)API_KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY|APIKEY|_PWD$|_PASS$|_KEY$|^SSH_AUTH_SOCK$|^SSHPASS$`)

// passwordRE is the test's own statement of a value with a URL that carries a password.
var passwordRE = regexp.MustCompile(`://[^/?#\s]*:[^/?#\s]*@`)

func testMap(t testing.TB) *pathmap.Map {
	m, err := pathmap.New(
		pathmap.Mount{Sandbox: "/work", Host: "/home/u/proj"},
		pathmap.Mount{Sandbox: "/tools", Host: "/opt/tools"},
	)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIsCredential(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "github_token": true, "OPENAI_API_KEY": true, "MyApiKey": true,
		"AWS_SECRET_ACCESS_KEY": true, "AWS_ACCESS_KEY_ID": true, "DB_PASSWORD": true, "PGPASSWD": true,
		"SSH_PASSPHRASE": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "GPG_PRIVATE_KEY": true,
		"npm_config__authToken": true, "TOKENIZERS_PARALLELISM": true, // the rule is by name alone
		"MYSQL_PWD": true, "db_pwd": true, "DB_PASS": true, "SMTP_PASS": true, "STRIPE_KEY": true,
		"deploy_key": true, "GPG_KEY": true, "SSH_AUTH_SOCK": true, "SSHPASS": true,
		"HOME": false, "PATH": false, "KEY": false, "API": false, "PASS": false, "PWD": false,
		"OLDPWD": false, "BYPASS": false, "MONKEY": false, "KEYBOARD_LAYOUT": false, "PASS_THROUGH": false,
		"PGPASSFILE": false, "SSH_AUTH_SOCKET_DIR": false,
	} {
		if got := IsCredential(name); got != want {
			t.Errorf("IsCredential(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestHasPassword(t *testing.T) {
	for value, want := range map[string]bool{
		"postgres://app:hunter2@db:5432/app":                         true,
		"https://x-access-token:ghp_x@github.com/o/r.git":            true,
		"redis://:hunter2@cache:6379/0":                              true,
		"http://user:@proxy:3128":                                    true,
		"https://pypi.org/simple https://u:p@private.example/simple": true,
		"mongodb+srv://u:p@cluster.example/db?retryWrites=true":      true,
		"http://proxy:8080":                                          false,
		"https://ghp_token@github.com/o/r.git":                       false, // a user, no password
		"ssh://git@github.com:22/o/r.git":                            false,
		"https://example.com/a:b@c":                                  false, // in the path, not the authority
		"user:pass@host":                                             false, // no URL
		"":                                                           false,
		"/usr/bin:/bin":                                              false,
	} {
		if got := HasPassword(value); got != want {
			t.Errorf("HasPassword(%q) = %v, want %v", value, got, want)
		}
	}
}

func TestLocal(t *testing.T) {
	host := []string{"HOME=/home/u", "GITHUB_TOKEN=ghp_x", "PATH=/usr/bin", "aws_secret_access_key=y",
		"NOEQUALS", "=C:", "EMPTY=", "X=a=b", "DATABASE_URL=postgres://app:pw@db/app", "MYSQL_PWD=pw",
		"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "PWD=/home/u", "OLDPWD=/", "HTTP_PROXY=http://proxy:3128"}
	want := []string{"HOME=/home/u", "PATH=/usr/bin", "EMPTY=", "X=a=b", "PWD=/home/u", "OLDPWD=/", "HTTP_PROXY=http://proxy:3128"}
	if got := Local(host); !slices.Equal(got, want) {
		t.Errorf("Local = %q, want %q", got, want)
	}
}

func TestSandbox(t *testing.T) {
	m := testMap(t)
	host := []string{
		"HOME=/home/u",
		"PROJ=/home/u/proj/src",
		"DIR=/home/u/proj/",
		"PATH=/opt/tools/bin:/usr/bin::/home/u/proj/bin",
		"ONLYOUT=/etc:/var",
		"LANG=en_US.UTF-8",
		"URL=http://proxy:8080",
		"EMPTY=",
		"GITHUB_TOKEN=ghp_secret",
		"Openai_Api_Key=sk",
		"SHADOW=/home/u/proj/first",
		"SHADOW=/home/u/proj/second",
		"SOCK=/home/u/proj/.sock",
		"DATABASE_URL=postgres://app:pw@db/app",
	}
	cases := []struct {
		name      string
		names     []string
		own       []string
		want      []string
		diagWords []string // each must appear in some diagnostic
	}{
		{"nothing named: own only", nil, []string{"PADDOCK=1"}, []string{"PADDOCK=1"}, nil},
		{"path value mapped", []string{"PROJ"}, nil, []string{"PROJ=/work/src"}, nil},
		{"trailing slash kept", []string{"DIR"}, nil, []string{"DIR=/work/"}, nil},
		{"path outside left out", []string{"HOME"}, nil, nil, []string{"HOME", "left out"}},
		{"list mapped element by element", []string{"PATH"}, nil, []string{"PATH=/tools/bin::/work/bin"}, []string{"PATH element 2"}},
		{"list with nothing seen left out", []string{"ONLYOUT"}, nil, nil, []string{"ONLYOUT has no element"}},
		{"not a path passes", []string{"LANG", "URL", "EMPTY"}, nil, []string{"LANG=en_US.UTF-8", "URL=http://proxy:8080", "EMPTY="}, nil},
		{"credential named: refused", []string{"GITHUB_TOKEN", "Openai_Api_Key", "LANG"}, nil, []string{"LANG=en_US.UTF-8"}, []string{"GITHUB_TOKEN is a credential", "Openai_Api_Key is a credential"}},
		{"credential of the kernel's own: refused", nil, []string{"PADDOCK_TOKEN=x", "A=1"}, []string{"A=1"}, []string{"PADDOCK_TOKEN is a credential"}},
		{"a URL with a password, named: refused", []string{"DATABASE_URL", "LANG"}, nil, []string{"LANG=en_US.UTF-8"}, []string{"DATABASE_URL holds a URL with a password"}},
		{"a URL with a password of the kernel's own: refused", nil, []string{"U=https://u:p@h/", "A=1"}, []string{"A=1"}, []string{"U holds a URL with a password"}},
		{"named replaces own", []string{"PATH"}, []string{"PATH=/kernel/bin", "A=1"}, []string{"PATH=/tools/bin::/work/bin", "A=1"}, []string{"PATH element 2 is a host path not seen"}},
		{"own kept when the named is left out", []string{"HOME"}, []string{"HOME=/tmp"}, []string{"HOME=/tmp"}, []string{"HOME is a host path not seen"}},
		{"named twice passes once", []string{"LANG", "LANG"}, nil, []string{"LANG=en_US.UTF-8"}, nil},
		{"first host entry wins", []string{"SHADOW"}, nil, []string{"SHADOW=/work/first"}, nil},
		{"unset named", []string{"NOPE"}, nil, nil, []string{"NOPE is not set"}},
		{"bad names", []string{"", "A=B"}, nil, nil, []string{`"" is not`, `"A=B" is not`}},
		{"order: own, then named", []string{"SOCK", "LANG"}, []string{"K=1"}, []string{"K=1", "SOCK=/work/.sock", "LANG=en_US.UTF-8"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, diags := Sandbox(host, c.names, c.own, m)
			if !slices.Equal(env, c.want) {
				t.Errorf("env = %q, want %q", env, c.want)
			}
			for _, w := range c.diagWords {
				if !slices.ContainsFunc(diags, func(d string) bool { return strings.Contains(d, w) }) {
					t.Errorf("no diagnostic says %q: %q", w, diags)
				}
			}
			if len(c.diagWords) == 0 && len(diags) > 0 {
				t.Errorf("unexpected diagnostics %q", diags)
			}
			for _, d := range diags {
				if strings.Contains(d, "/home/u") || strings.Contains(d, "ghp_secret") || strings.Contains(d, "/etc") || strings.Contains(d, "pw@") || strings.Contains(d, "u:p") {
					t.Errorf("diagnostic %q carries a value", d)
				}
			}
		})
	}
}

// Random environments: names built of pieces, credential words among them in any case;
// values that are paths in and out of the mounts, lists of them, and plain words.
func randEnv(r *rand.Rand) []string {
	pieces := []string{"HOME", "PATH", "X", "api_key", "Token", "SECRET", "passwd", "PassPhrase",
		"credentials", "private_KEY", "ACCESS_key", "apikey", "LANG", "_", "1", "API", "KEY", "PASS", "WORD",
		"PWD", "_pwd", "SSH_AUTH_SOCK", "SSHPASS", "OLD"}
	values := []string{"/home/u/proj", "/home/u/proj/a", "/opt/tools/bin", "/etc", "/", "word", "",
		"http://h:1", "/opt/tools/bin:/usr/bin", "::/home/u", "/home/u/proj/x/", "https://u:p@h/x", "redis://:p@h"}
	var env []string
	for range r.IntN(20) {
		var name string
		for range 1 + r.IntN(3) {
			name += pieces[r.IntN(len(pieces))]
		}
		v := values[r.IntN(len(values))]
		if r.IntN(3) == 0 {
			v += ":" + values[r.IntN(len(values))]
		}
		env = append(env, name+"="+v)
	}
	return env
}

func names(env []string) []string {
	var out []string
	for _, e := range env {
		n, _, _ := strings.Cut(e, "=")
		out = append(out, n)
	}
	return out
}

// No output entry ever has a credential's name, from either function, whatever is named.
func TestNeverACredential(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	m := testMap(t)
	sawCredential := false
	for range 5000 {
		host, own := randEnv(r), randEnv(r)
		named := names(randEnv(r))
		hn := names(host)
		for range r.IntN(len(hn) + 1) { // name some of the host's own variables too
			named = append(named, hn[r.IntN(len(hn))])
		}
		env, _ := Sandbox(host, named, own, m)
		seen := map[string]bool{}
		for _, e := range env {
			n, v, _ := strings.Cut(e, "=")
			if credentialRE.MatchString(n) || passwordRE.MatchString(v) {
				t.Fatalf("Sandbox passed credential %q (named %q)", e, named)
			}
			if seen[n] {
				t.Fatalf("Sandbox passed %s twice: %q", n, env)
			}
			seen[n] = true
			if !slices.Contains(own, e) {
				// A named host variable: each path in it is a sandbox path.
				if !slices.Contains(named, n) {
					t.Fatalf("Sandbox passed %q: neither the kernel's own nor named", e)
				}
				// A value that is a path, or a list of paths: every one mapped.
				elems := strings.Split(v, ":")
				if !slices.ContainsFunc(elems, func(el string) bool { return el != "" && !strings.HasPrefix(el, "/") }) {
					for _, el := range elems {
						if _, ok := m.Mount(el); el != "" && !ok {
							t.Fatalf("Sandbox passed %q: %q is not a sandbox path", e, el)
						}
					}
				}
			}
		}
		for _, e := range Local(host) {
			if n, v, _ := strings.Cut(e, "="); credentialRE.MatchString(n) || passwordRE.MatchString(v) {
				t.Fatalf("Local passed credential %q", e)
			}
		}
		for _, e := range host {
			if n, v, _ := strings.Cut(e, "="); credentialRE.MatchString(n) || passwordRE.MatchString(v) {
				sawCredential = true
			} else if !slices.Contains(Local(host), e) {
				t.Fatalf("Local dropped %q, not a credential", e)
			}
		}
	}
	if !sawCredential {
		t.Fatal("no credential was ever generated")
	}
}
