package config

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// The property: whatever a project's file holds (any spelling of any trusted key, any value),
// the trusted settings Load gives are those it gives without the file, and what a project may
// set stays within its bounds.

// trustedPaths are the documented paths of every table and setting a project may not set,
// read from Settings' keys: all but the project keys and the tables that lead to them.
func trustedPaths() [][]string {
	var out [][]string
	var walk func(t reflect.Type, at []string)
	walk = func(t reflect.Type, at []string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("mapstructure")
			if strings.HasSuffix(name, ",squash") {
				// Its fields are the table's own (output.Limit's: project keys).
				if f.Type.PkgPath() == t.PkgPath() {
					walk(f.Type, at)
				}
				continue
			}
			p := append(append([]string(nil), at...), name)
			if keyIndex(p) < 0 && !leadsToProjectKey(p) {
				out = append(out, p)
			}
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
				walk(f.Type, p)
			}
		}
	}
	walk(reflect.TypeFor[Settings](), nil)
	return out
}

func leadsToProjectKey(p []string) bool {
	for _, k := range projectKeys {
		if len(k.parts) > len(p) && samePrefix(k.parts, p) {
			return true
		}
	}
	return false
}

// lookAlikes are characters drawn like an ASCII letter but not one.
var lookAlikes = map[rune][]rune{
	'a': {'\u0430', '\u03b1'}, 'c': {'\u0441', '\u217d'}, 'e': {'\u0435'}, 'i': {'\u0456', '\u0131'},
	'k': {'\u212a', '\u03ba'}, 'o': {'\u043e', '\u03bf'}, 'p': {'\u0440', '\u03c1'}, 's': {'\u017f', '\u0455'},
	'h': {'\u04bb'}, 'r': {'\u0433'}, 'n': {'\u0578'}, 'l': {'\u04cf', '\u217c'}, 'y': {'\u0443'},
	'x': {'\u0445'}, 'd': {'\u217e'}, 'm': {'\u217f'}, 'v': {'\u2174'}, 't': {'\u0442'},
}

// invisible are characters that show as nothing.
var invisible = []rune{'\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u00ad', '\u0301'}

// spell writes one part of a key as an attacker might: each character kept, cased at random,
// swapped for another in its Unicode case-fold orbit, for its fullwidth form or a look-alike;
// with '_', '-', a space or an invisible character put in.
func spell(r *rand.Rand, part string) string {
	var b strings.Builder
	for _, c := range part {
		switch r.IntN(8) {
		case 0:
			orbit := []rune{c}
			for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
				orbit = append(orbit, f)
			}
			c = orbit[r.IntN(len(orbit))]
		case 1:
			c = unicode.ToUpper(c)
		case 2:
			if c > ' ' && c < 0x7f {
				c += 0xfee0 // the fullwidth form
			}
		case 3:
			if la := lookAlikes[unicode.ToLower(c)]; len(la) > 0 {
				c = la[r.IntN(len(la))]
			}
		}
		b.WriteRune(c)
		if r.IntN(12) == 0 {
			ins := []rune{'_', '-', ' ', invisible[r.IntN(len(invisible))]}
			b.WriteRune(ins[r.IntN(len(ins))])
		}
	}
	return b.String()
}

// doc is a settings file's table, in order, repeats kept.
type doc []entry

type entry struct {
	key string
	val any // a scalar, []any, or doc
}

// randomValue is any value, trusted keys nested in it.
func randomValue(r *rand.Rand, depth int, trusted [][]string) any {
	switch n := r.IntN(9); {
	case n == 0:
		return []any{"sh", "-c", "touch /tmp/owned"}
	case n == 1:
		return []any{"read", "write", "exec", "net", "outside", "protected", "secret"}
	case n == 2 && depth < 3:
		return doc{{"action", "allow"}, {"command", "rm"}}
	case n == 3 && depth < 3:
		var d doc
		for range 1 + r.IntN(3) {
			p := trusted[r.IntN(len(trusted))]
			d = append(d, entry{spellPath(r, p), randomValue(r, depth+1, trusted)})
		}
		return d
	case n == 4:
		return []any{r.IntN(3) - 1, "evil", doc{{"kind", "wrapped"}}}
	case n == 5:
		return []int64{0, -1, 1 << 40, 1<<63 - 1, 7}[r.IntN(5)]
	case n == 6:
		return r.IntN(2) == 0
	default:
		return []string{"wrapped", "ssh", "local", "evil", "secret", "0s", "1h", "head", ""}[r.IntN(9)]
	}
}

// spellPath is a path with each part spelled, joined by dots (a dotted key).
func spellPath(r *rand.Rand, p []string) string {
	parts := make([]string, len(p))
	for i, s := range p {
		parts[i] = s
		if r.IntN(4) != 0 {
			parts[i] = spell(r, s)
		}
	}
	return strings.Join(parts, ".")
}

// asciiCase is a path with its letters cased at random, joined by dots.
func asciiCase(r *rand.Rand, p []string) string {
	b := []byte(strings.Join(p, "."))
	for i, c := range b {
		if r.IntN(2) == 0 && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// projectValue is a value for a project key, within its bounds or just outside them.
func projectValue(r *rand.Rand, leaf string) any {
	switch leaf {
	case "bytes":
		return []int64{1, MaxProjectBytes, MaxProjectBytes + 1, 0, r.Int64N(MaxProjectBytes) + 1}[r.IntN(5)]
	case "lines":
		return []int64{1, MaxProjectLines, MaxProjectLines + 1, 0, r.Int64N(MaxProjectLines) + 1}[r.IntN(5)]
	case "mode":
		return []string{"head", "tail", "Head"}[r.IntN(3)]
	}
	return []string{"1s", "10m", "10m1s", "0s", "90s"}[r.IntN(5)]
}

// randomDoc is a project's file aiming at the trusted paths (spelled, dotted or nested), with
// project keys among them.
func randomDoc(r *rand.Rand, trusted [][]string) doc {
	var d doc
	for range 1 + r.IntN(5) {
		p := trusted[r.IntN(len(trusted))]
		val := randomValue(r, 0, trusted)
		spelt := spellPath
		if r.IntN(3) == 0 {
			k := projectKeys[r.IntN(len(projectKeys))]
			p = k.parts
			if r.IntN(2) == 0 {
				val, spelt = projectValue(r, k.parts[len(k.parts)-1]), asciiCase
			}
		}
		if r.IntN(3) == 0 && len(p) > 1 { // nested instead of dotted
			cut := 1 + r.IntN(len(p)-1)
			d = append(d, entry{spelt(r, p[:cut]), doc{{spelt(r, p[cut:]), val}}})
			continue
		}
		d = append(d, entry{spelt(r, p), val})
	}
	return d
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (d doc) json() string {
	var b strings.Builder
	b.WriteString("{")
	for i, e := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteJSON(e.key) + ": " + valueJSON(e.val))
	}
	return b.String() + "}"
}

func valueJSON(v any) string {
	switch t := v.(type) {
	case doc:
		return t.json()
	case []any:
		var parts []string
		for _, x := range t {
			parts = append(parts, valueJSON(x))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return quoteJSON(t)
	}
	return fmt.Sprint(v)
}

// yaml writes block YAML; keys that are plain letters are left unquoted.
func (d doc) yaml(indent string) string {
	var b strings.Builder
	for _, e := range d {
		key := quoteJSON(e.key)
		if e.key != "" && strings.IndexFunc(e.key, func(c rune) bool { return !unicode.IsLetter(c) }) < 0 {
			key = e.key
		}
		if sub, ok := e.val.(doc); ok && len(sub) > 0 {
			b.WriteString(indent + key + ":\n" + sub.yaml(indent+"  "))
			continue
		}
		b.WriteString(indent + key + ": " + valueJSON(e.val) + "\n")
	}
	return b.String()
}

func quoteTOML(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteRune('\\')
			b.WriteRune(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String() + `"`
}

// toml writes each entry as a line, its key's dots kept as TOML dotted keys, tables inline.
func (d doc) toml() string {
	var b strings.Builder
	for _, e := range d {
		b.WriteString(keyTOML(e.key) + " = " + valueTOML(e.val) + "\n")
	}
	return b.String()
}

func keyTOML(k string) string {
	var parts []string
	for _, p := range strings.Split(k, ".") {
		parts = append(parts, quoteTOML(p))
	}
	return strings.Join(parts, ".")
}

func valueTOML(v any) string {
	switch t := v.(type) {
	case doc:
		var parts []string
		for _, e := range t {
			parts = append(parts, keyTOML(e.key)+" = "+valueTOML(e.val))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		var parts []string
		for _, x := range t {
			parts = append(parts, valueTOML(x))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return quoteTOML(t)
	}
	return fmt.Sprint(v)
}

// globals are trusted files the property runs under: none, and each kind of trusted setting.
var globals = []string{
	"",
	"kernelTransport: {kind: local, env: [HOME]}\nssh: {hosts: [box]}\n",
	"shell:\n  autoEffects: [read]\n  rules: [{action: deny, command: curl}]\noutput: {bytes: 0, lines: 0}\n",
	"kernelTransport:\n  kind: wrapped\n  wrapped: {argvPrefix: [docker, exec, -i, box]}\n  docker: {image: alpine, network: none}\n",
}

var (
	basesMu sync.Mutex
	bases   = map[[2]string]*Loaded{} // by global file and settings directory; guarded by basesMu
)

// baseline is Load without a project's file, kept for the next checks under the same files.
func baseline(o Options) (*Loaded, error) {
	basesMu.Lock()
	defer basesMu.Unlock()
	k := [2]string{o.GlobalFile, Dir()}
	if l := bases[k]; l != nil {
		return l, nil
	}
	l, err := load(o, nil)
	if err == nil {
		bases[k] = l
	}
	return l, err
}

// checkNeverWidens loads body as a project's file (named by ext) under the trusted file
// global and fails when a trusted setting differs from Load without the file, or when a
// project's value is outside its bounds.
func checkNeverWidens(t testing.TB, global, ext string, body []byte) *Loaded {
	o := Options{}
	if global != "" {
		o.GlobalFile = global
	}
	base, err := baseline(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := load(o, &projectFile{path: "settings." + ext, data: body})
	if err != nil {
		t.Fatalf("a project's file failed Load: %v\n%s", err, body)
	}
	if !reflect.DeepEqual(trustedOf(l.Settings), trustedOf(base.Settings)) {
		t.Fatalf("a project's %s file changed a trusted setting:\n%s\nwithout: %+v\nwith:    %+v", ext, body, trustedOf(base.Settings), trustedOf(l.Settings))
	}
	got, was := l.Settings, base.Settings
	if got.Output.Bytes != was.Output.Bytes && (got.Output.Bytes < 1 || got.Output.Bytes > MaxProjectBytes) ||
		got.Output.Lines != was.Output.Lines && (got.Output.Lines < 1 || got.Output.Lines > MaxProjectLines) {
		t.Fatalf("a project's bound is out of bounds: %+v\n%s", got.Output, body)
	}
	if got.Shell.BlockingBudget != was.Shell.BlockingBudget {
		d, err := time.ParseDuration(got.Shell.BlockingBudget)
		if err != nil || d <= 0 || d > MaxProjectBlockingBudget {
			t.Fatalf("a project's blocking budget is out of bounds: %q\n%s", got.Shell.BlockingBudget, body)
		}
	}
	return l
}

// law: project_never_widens
func TestProjectNeverWidens(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PADDOCK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("PADDOCK_TEST_SEED=%d", seed)
	r := rand.New(rand.NewPCG(seed, 13))
	trusted := trustedPaths()
	if len(trusted) < 20 {
		t.Fatalf("only %d trusted paths found: %v", len(trusted), trusted)
	}
	dir := t.TempDir()
	var files []string
	for i, g := range globals {
		if g == "" {
			files = append(files, "")
			continue
		}
		p := filepath.Join(dir, "global"+strconv.Itoa(i)+".yaml")
		write(t, p, g)
		files = append(files, p)
	}
	// read counts the files decoded (not ignored whole) and applied those where a project
	// key applied, by format: the property is not met by files that never parse.
	read, applied := map[string]int{}, map[string]int{}
	n := 1000
	for range n {
		d := randomDoc(r, trusted)
		g := files[r.IntN(len(files))]
		for ext, body := range map[string]string{"yaml": d.yaml(""), "json": d.json(), "toml": d.toml()} {
			l := checkNeverWidens(t, g, ext, []byte(body))
			if len(l.Ignored) == 0 || l.Ignored[0].Code() != IgnoredUnreadable {
				read[ext]++
			}
			for _, src := range l.Sources {
				if src == "settings."+ext {
					applied[ext]++
					break
				}
			}
		}
	}
	t.Logf("of %d files each: read %v, a project key applied %v", n, read, applied)
	for _, ext := range []string{"yaml", "json", "toml"} {
		if read[ext] < n*3/4 || applied[ext] < n/20 {
			t.Errorf("%s: of %d files %d were read and %d applied a project key", ext, n, read[ext], applied[ext])
		}
	}
}
