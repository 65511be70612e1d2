// Package environ builds the environment a kernel starts with. A local kernel gets the host's
// environment; a kernel in a sandbox gets its own entries and only the host variables the
// settings name, their host paths turned into sandbox paths. Credentials are never passed to
// either.
package environ

import (
	"fmt"
	"slices"
	"strings"

	"github.com/paddockhq/paddock/transport/pathmap"
)

// credentialWords mark a variable as a credential when its name holds one, in any case.
var credentialWords = []string{
	"API_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE",
	"CREDENTIAL", "PRIVATE_KEY", "ACCESS_KEY", "APIKEY",
}

// credentialSuffixes mark a variable as a credential when its name ends with one, in any
// case: MYSQL_PWD, DB_PASS, STRIPE_KEY. PWD and OLDPWD, the shell's directories, do not;
// GPG_KEY, often a public key's fingerprint, does: a name cannot tell the two apart.
var credentialSuffixes = []string{"_PWD", "_PASS", "_KEY"}

// credentialNames are credentials by their whole name: the ssh agent's socket (whoever
// connects signs with the user's keys) and sshpass's password.
var credentialNames = []string{"SSH_AUTH_SOCK", "SSHPASS"}

// IsCredential reports whether a variable's name marks it as a credential.
func IsCredential(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range credentialWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(up, s) {
			return true
		}
	}
	return slices.Contains(credentialNames, up)
}

// HasPassword reports whether a value holds a URL with a password
// (scheme://user:password@host), anywhere in it: DATABASE_URL, HTTPS_PROXY, a list of
// index URLs.
func HasPassword(value string) bool {
	for {
		i := strings.Index(value, "://")
		if i < 0 {
			return false
		}
		value = value[i+3:]
		end := strings.IndexAny(value, "/?# \t\n")
		if end < 0 {
			end = len(value)
		}
		if at := strings.LastIndexByte(value[:end], '@'); at >= 0 && strings.IndexByte(value[:at], ':') >= 0 {
			return true
		}
	}
}

// isCredentialEntry reports whether a variable is a credential by its name or its value.
func isCredentialEntry(name, value string) bool { return IsCredential(name) || HasPassword(value) }

// split returns an entry's name and value; ok is false for an entry with no name.
func split(entry string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(entry, "=")
	return name, value, ok && name != ""
}

// Local returns the host's environment minus credentials, by name or by value (and entries
// with no NAME=).
func Local(host []string) []string {
	out := make([]string, 0, len(host))
	for _, e := range host {
		if name, value, ok := split(e); ok && !isCredentialEntry(name, value) {
			out = append(out, e)
		}
	}
	return out
}

// Sandbox returns the environment of a kernel in a sandbox: its own entries, then the host
// variables named in names, in that order, each name once; a variable named replaces the
// kernel's own entry of the same name. A credential is never passed, not
// even when named or among own. A host value that is a host path (the whole value an absolute
// path) gets its sandbox path through m, as does each element of a ':'-separated list of
// absolute paths such as PATH (empty elements are kept); a path seen from no mount is left
// out: the entry, or that element of a list. Other values pass as they are. Each thing left
// out gets a diagnostic, which names the variable but never its value.
func Sandbox(host, names, own []string, m *pathmap.Map) (env, diags []string) {
	have := map[string]bool{}
	for _, e := range own {
		name, value, ok := split(e)
		switch {
		case !ok:
			diags = append(diags, fmt.Sprintf("environment: kernel entry %q has no NAME=: left out", e))
		case IsCredential(name):
			diags = append(diags, fmt.Sprintf("environment: %s is a credential: not passed", name))
		case HasPassword(value):
			diags = append(diags, fmt.Sprintf("environment: %s holds a URL with a password: not passed", name))
		case have[name]:
			diags = append(diags, fmt.Sprintf("environment: %s is set twice for the kernel: the first kept", name))
		default:
			have[name] = true
			env = append(env, e)
		}
	}
	hostVals := map[string]string{}
	for _, e := range host {
		if name, value, ok := split(e); ok {
			if _, dup := hostVals[name]; !dup { // the first wins, as os.Getenv has it
				hostVals[name] = value
			}
		}
	}
	named := map[string]bool{}
	for _, name := range names {
		if name == "" || strings.ContainsRune(name, '=') {
			diags = append(diags, fmt.Sprintf("environment: %q is not a variable name: left out", name))
			continue
		}
		if IsCredential(name) {
			diags = append(diags, fmt.Sprintf("environment: %s is a credential: not passed, even when named", name))
			continue
		}
		if named[name] {
			continue // named twice
		}
		named[name] = true
		value, set := hostVals[name]
		if !set {
			diags = append(diags, fmt.Sprintf("environment: %s is not set on the host", name))
			continue
		}
		if HasPassword(value) {
			diags = append(diags, fmt.Sprintf("environment: %s holds a URL with a password: not passed, even when named", name))
			continue
		}
		mapped, ok, d := sandboxValue(name, value, m)
		diags = append(diags, d...)
		if !ok {
			continue
		}
		// A variable named takes the place of the kernel's own entry of that name: the
		// person asked for the host's (PATH, say).
		if i := slices.IndexFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }); i >= 0 {
			env[i] = name + "=" + mapped
			continue
		}
		have[name] = true
		env = append(env, name+"="+mapped)
	}
	return env, diags
}

// sandboxValue turns a host value into its sandbox form. ok is false when the entry is left
// out.
func sandboxValue(name, value string, m *pathmap.Map) (mapped string, ok bool, diags []string) {
	elems := strings.Split(value, ":")
	paths := 0
	for _, el := range elems {
		switch {
		case el == "":
		case strings.HasPrefix(el, "/"):
			paths++
		default:
			return value, true, nil // not a path, nor a list of them
		}
	}
	if paths == 0 {
		return value, true, nil // "" or only ':'
	}
	if len(elems) == 1 {
		p, err := toSandbox(value, m)
		if err != nil {
			return "", false, []string{fmt.Sprintf("environment: %s is a host path not seen from the sandbox: left out", name)}
		}
		return p, true, nil
	}
	kept := make([]string, 0, len(elems))
	for i, el := range elems {
		if el == "" {
			kept = append(kept, el)
			continue
		}
		p, err := toSandbox(el, m)
		if err != nil {
			diags = append(diags, fmt.Sprintf("environment: %s element %d is a host path not seen from the sandbox: left out", name, i+1))
			continue
		}
		kept = append(kept, p)
	}
	if len(diags) == paths {
		return "", false, append(diags, fmt.Sprintf("environment: %s has no element seen from the sandbox: left out", name))
	}
	return strings.Join(kept, ":"), true, diags
}

// toSandbox maps one host path, keeping a trailing slash.
func toSandbox(p string, m *pathmap.Map) (string, error) {
	sb, err := m.ToSandbox(p)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(p, "/") && sb != "/" {
		sb += "/"
	}
	return sb, nil
}
