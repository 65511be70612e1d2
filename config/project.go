package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/orchestrator/output"
)

// This file is the decision: what of a project's .paddock/settings file applies. Whoever can
// write a repository writes that file, so it is decoded into Project, a type that holds only
// what a project may set. A key is one of those when each of its parts equals the part as
// documented, letters compared in ASCII case only: no Unicode folding (U+017F, the long s,
// is not s; U+212A, the Kelvin sign, is not k), no look-alike, no invisible character. Every
// other key, however spelled, is ignored and named as written in an Ignored; so is a value
// out of its bounds or of the wrong type, and a setting the file gives more than once.

// Bounds of a project's values. A trusted source (flags, environment, the global file) may set
// any value; a project stays within these, so that it cannot make output unbounded or a call
// never detach for the user who opens it.
const (
	// MaxProjectBytes bounds output.bytes: a window holds up to this much of each step's and
	// job's output in memory, and a daemon runs many at once; 16 MiB is over 300 times the
	// default. The least is 1, since 0 means no byte bound at all.
	MaxProjectBytes = 16 << 20
	// MaxProjectLines bounds output.lines: 50 times the default. The least is 1, since 0
	// means no line bound (and with a trusted byte bound of 0, no bound at all).
	MaxProjectLines = 100_000
	// MaxProjectBlockingBudget bounds shell.blockingBudget: a call that blocks longer holds
	// the agent's turn with nothing to show; longer work goes on as a job. It is more than 0,
	// since 0 means a call blocks to its end.
	MaxProjectBlockingBudget = 10 * time.Minute
	// MaxProjectFileBytes bounds the file itself: a project's settings are a few lines, and a
	// bigger file is not read, so no file makes the host read or hold more.
	MaxProjectFileBytes = 64 << 10
	// maxProjectValues bounds the values decoding visits: YAML aliases can repeat a table many
	// times over without the file growing.
	maxProjectValues = 10_000
)

// Project is what a project's settings file may set; a nil field is not set.
type Project struct {
	Output ProjectOutput
	Shell  ProjectShell
}

// ProjectOutput is the truncation setting a project may choose, within bounds.
type ProjectOutput struct {
	Bytes *int
	Lines *int
	Mode  *output.Mode
}

// ProjectShell is what a project may set of the bash tool: never the auto set or the rules.
type ProjectShell struct {
	BlockingBudget *time.Duration
}

// The codes of Ignored.
const (
	// IgnoredNotAllowed: the key is not one a project may set (a trusted key, a look-alike of
	// one, or no key at all).
	IgnoredNotAllowed = "not_allowed"
	// IgnoredInvalid: the value is of the wrong type or out of bounds.
	IgnoredInvalid = "invalid"
	// IgnoredDuplicate: the file sets the key more than once (spelled the same, in another
	// case, or nested and dotted); no one of them wins, so each is ignored.
	IgnoredDuplicate = "duplicate"
	// IgnoredUnreadable: the whole file (not a regular file, too big, does not parse).
	IgnoredUnreadable = "unreadable"
)

// Ignored is what of a project's settings file did not apply: one key, or the whole file.
type Ignored struct {
	// File is the settings file.
	File string
	// Key is the key as written, its levels joined by dots and quoted with every character
	// outside printable ASCII escaped (so a look-alike shows); "" for the whole file.
	Key    string
	code   string
	reason string
}

// Code is the class of what was ignored: IgnoredNotAllowed, IgnoredInvalid,
// IgnoredDuplicate or IgnoredUnreadable.
func (i Ignored) Code() string { return i.code }

// String is the warning: the file, the key as written, why it is ignored.
func (i Ignored) String() string {
	if i.Key == "" {
		return fmt.Sprintf("%s is ignored: %s", i.File, i.reason)
	}
	return fmt.Sprintf("%s: %s is ignored: %s", i.File, i.Key, i.reason)
}

// projectKey is one key a project may set: its parts as documented, and how its value is read.
type projectKey struct {
	parts []string
	set   func(p *Project, v *value) error
}

// projectKeys are every key a project may set; nothing else is ever read from its file.
var projectKeys = []projectKey{
	{[]string{"output", "bytes"}, func(p *Project, v *value) (err error) {
		p.Output.Bytes, err = intIn(v, 1, MaxProjectBytes)
		return err
	}},
	{[]string{"output", "lines"}, func(p *Project, v *value) (err error) {
		p.Output.Lines, err = intIn(v, 1, MaxProjectLines)
		return err
	}},
	{[]string{"output", "mode"}, func(p *Project, v *value) error {
		var m output.Mode
		if v.kind != textValue || m.UnmarshalText([]byte(v.text)) != nil {
			return fmt.Errorf("want head or tail, not %s", v)
		}
		p.Output.Mode = &m
		return nil
	}},
	{[]string{"shell", "blockingBudget"}, func(p *Project, v *value) error {
		want := fmt.Errorf("want a duration such as 30s, more than 0 and at most %s, not %s", MaxProjectBlockingBudget, v)
		if v.kind != textValue {
			return want
		}
		d, err := time.ParseDuration(v.text)
		if err != nil || d <= 0 || d > MaxProjectBlockingBudget {
			return want
		}
		p.Shell.BlockingBudget = &d
		return nil
	}},
}

// mapDepth is the deepest level of a table that can hold a project's key (the file's own
// table is level 0): the most parts of a key, less one. Deeper tables are never read.
const mapDepth = 1

// ProjectKeys are the keys a project may set, dotted as documented.
func ProjectKeys() []string {
	out := make([]string, len(projectKeys))
	for i, k := range projectKeys {
		out[i] = strings.Join(k.parts, ".")
	}
	return out
}

func intIn(v *value, lo, hi int) (*int, error) {
	if v.kind != intValue || v.n < int64(lo) || v.n > int64(hi) {
		return nil, fmt.Errorf("want a whole number from %d to %d, not %s", lo, hi, v)
	}
	n := int(v.n)
	return &n, nil
}

// DecodeProject reads a project's settings file (its name says the format: .json, .yaml,
// .yml or .toml): what applies, and what is ignored. It never fails: a file that cannot be
// read as settings is ignored whole.
func DecodeProject(file string, data []byte) (Project, []Ignored) {
	root, err := parseSettings(strings.TrimPrefix(filepath.Ext(file), "."), data)
	if err != nil {
		return Project{}, []Ignored{{File: file, code: IgnoredUnreadable, reason: err.Error()}}
	}
	if root == nil { // an empty file
		return Project{}, nil
	}
	d := &projectDecoder{file: file, found: map[int][]found{}}
	if root.kind != mapValue {
		return Project{}, []Ignored{{File: file, code: IgnoredUnreadable, reason: fmt.Sprintf("it holds %s, not a table of settings", root)}}
	}
	d.walk(root, nil, nil)
	var p Project
	for i, k := range projectKeys {
		fs := d.found[i]
		switch {
		case len(fs) > 1:
			var as []string
			for _, f := range fs {
				as = append(as, f.key)
			}
			d.ignore(strings.Join(as, ", "), IgnoredDuplicate, fmt.Sprintf("%s is set %d times in one file, so none of them applies", strings.Join(k.parts, "."), len(fs)))
		case len(fs) == 1:
			if err := k.set(&p, fs[0].val); err != nil {
				d.ignore(fs[0].key, IgnoredInvalid, err.Error())
			}
		}
	}
	return p, d.ignored
}

// found is a project key's value as one place of the file gives it.
type found struct {
	key string // as written, quoted
	val *value
}

type projectDecoder struct {
	file    string
	found   map[int][]found // by index in projectKeys
	ignored []Ignored
}

func (d *projectDecoder) ignore(key, code, reason string) {
	d.ignored = append(d.ignored, Ignored{File: d.file, Key: key, code: code, reason: reason})
}

// walk reads table m, whose place in the file is written (the keys as written above it) and
// parts (the documented parts they matched).
func (d *projectDecoder) walk(m *value, written, parts []string) {
	for _, f := range m.fields {
		w := append(append([]string(nil), written...), f.key)
		key := strconv.QuoteToASCII(strings.Join(w, "."))
		if f.merge {
			d.ignore(key, IgnoredNotAllowed, "YAML merge keys are not read in a project's settings")
			continue
		}
		p, ok := matchParts(parts, f.key)
		if !ok {
			d.ignore(key, IgnoredNotAllowed, notAllowed())
			continue
		}
		if i := keyIndex(p); i >= 0 {
			d.found[i] = append(d.found[i], found{key, f.val})
			continue
		}
		if f.val.kind != mapValue {
			d.ignore(key, IgnoredInvalid, fmt.Sprintf("want a table of settings, not %s", f.val))
			continue
		}
		d.walk(f.val, w, p)
	}
}

// matchParts adds the parts of key as written (dot-separated) to parts, each as documented:
// ok when they lead to a project key, or are one.
func matchParts(parts []string, key string) ([]string, bool) {
	p := append([]string(nil), parts...)
	for _, seg := range strings.Split(key, ".") {
		doc, ok := documentedPart(len(p), p, seg)
		if !ok {
			return nil, false
		}
		p = append(p, doc)
	}
	return p, true
}

// documentedPart is the part at level n after parts that seg names, compared in ASCII case
// only; ok is false when no project key goes that way.
func documentedPart(n int, parts []string, seg string) (string, bool) {
	for _, k := range projectKeys {
		if len(k.parts) <= n || !samePrefix(k.parts, parts) {
			continue
		}
		if asciiFold(seg, k.parts[n]) {
			return k.parts[n], true
		}
	}
	return "", false
}

func samePrefix(full, prefix []string) bool {
	for i, p := range prefix {
		if full[i] != p {
			return false
		}
	}
	return true
}

func keyIndex(parts []string) int {
	for i, k := range projectKeys {
		if len(k.parts) == len(parts) && samePrefix(k.parts, parts) {
			return i
		}
	}
	return -1
}

// asciiFold reports whether a and b are equal but for the case of ASCII letters. Any other
// byte must be equal, so a non-ASCII character never stands for an ASCII one.
func asciiFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x >= 0x80 || y >= 0x80 {
			return false
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func notAllowed() string {
	return fmt.Sprintf("a project's settings may set only %s; any other setting belongs in the global settings file", strings.Join(ProjectKeys(), ", "))
}

// values are the settings p sets, as the keys Load merges below the trusted sources.
func (p Project) values() map[string]any {
	out := map[string]any{}
	if p.Output.Bytes != nil {
		out["output.bytes"] = *p.Output.Bytes
	}
	if p.Output.Lines != nil {
		out["output.lines"] = *p.Output.Lines
	}
	if p.Output.Mode != nil {
		out["output.mode"] = p.Output.Mode.String()
	}
	if p.Shell.BlockingBudget != nil {
		out["shell.blockingbudget"] = p.Shell.BlockingBudget.String()
	}
	return out
}
