package policy

import "strings"

// sed's rules: each script must be a known-safe form, else the step is exec.
//
// Options: -n -E -r -s -u -z -e SCRIPT -i[SUFFIX] and their long forms (--quiet --silent
// --regexp-extended --separate --unbuffered --null-data --expression --in-place); any
// other (-f, -l, --posix, --sandbox, …) makes the step exec.
// Scripts: commands p P d D q Q = n N g G h H x { }, s with flags g i I m M p and a
// number, y, and # comments; addresses N, $, /regex/ (flags I M), a range of two, and !.
// Everything else (e, w, r, R, W, a, i, c, b, t, labels, s///e, s///w…) is not known-safe.

var sedSpec = &spec{
	short:    "efl",
	shortOpt: "i",
	long:     []string{"expression", "file", "line-length"},
	longOpt:  []string{"in-place"},
	flags: []string{"quiet", "silent", "regexp-extended", "separate", "unbuffered", "null-data",
		"zero-terminated", "posix", "debug", "sandbox", "follow-symlinks", "binary", "help", "version"},
}

// sedAllowed are the options of the safe forms.
var sedAllowed = map[string]bool{
	"quiet": true, "silent": true, "regexp-extended": true, "separate": true,
	"unbuffered": true, "null-data": true, "zero-terminated": true, "expression": true,
	"in-place": true,
}

// sedArgs splits a sed command line into its scripts and files; ok is false when an
// option is outside the safe forms.
func sedArgs(words []string) (scripts, files []string, inPlace, ok bool) {
	a := sedSpec.parse(words)
	for _, o := range a.opts {
		if o.short != 0 {
			if !strings.ContainsRune("nErsuzei", rune(o.short)) {
				return nil, nil, false, false
			}
			continue
		}
		for _, n := range o.names {
			if !sedAllowed[n] {
				return nil, nil, false, false
			}
		}
	}
	scripts = a.values("-e", "--expression")
	files = a.operands
	if !a.has("-e", "--expression") && len(files) > 0 {
		scripts, files = files[:1], files[1:]
	}
	return scripts, files, a.has("-i", "--in-place"), true
}

// SedSafe reports whether a sed script is made only of known-safe forms: it can print,
// delete, move text between pattern and hold space, substitute and quit, but not read or
// write a file nor run a program.
func SedSafe(script string) bool {
	p := sedParser{s: script}
	return p.script()
}

type sedParser struct {
	s     string
	i     int
	depth int
}

func (p *sedParser) eof() bool { return p.i >= len(p.s) }
func (p *sedParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

// blanks skips spaces and tabs; seps also skips newlines and semicolons.
func (p *sedParser) blanks() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}
func (p *sedParser) seps() {
	for !p.eof() && strings.IndexByte(" \t\n;", p.peek()) >= 0 {
		p.i++
	}
}

func (p *sedParser) script() bool {
	for {
		p.seps()
		if p.eof() {
			return p.depth == 0
		}
		if !p.command() {
			return false
		}
	}
}

// command reads [address[,address]][!]command and what ends it.
func (p *sedParser) command() bool {
	if p.peek() == '#' {
		for !p.eof() && p.peek() != '\n' {
			p.i++
		}
		return true
	}
	if zero, ok := p.address(); ok {
		p.blanks()
		if p.peek() == ',' {
			p.i++
			p.blanks()
			if _, ok := p.address(); !ok {
				return false
			}
		} else if zero {
			return false // line 0 is only the start of a range (0,/re/)
		}
	}
	p.blanks()
	if p.peek() == '!' {
		p.i++
		p.blanks()
	}
	if p.eof() {
		return false
	}
	c := p.s[p.i]
	p.i++
	switch c {
	case 'p', 'P', 'd', 'D', '=', 'n', 'N', 'g', 'G', 'h', 'H', 'x':
	case 'q', 'Q':
		p.blanks()
		for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
			p.i++
		}
	case '{':
		p.depth++
		return true
	case '}':
		if p.depth == 0 {
			return false
		}
		p.depth--
	case 's':
		if !p.substitute() {
			return false
		}
	case 'y':
		d, ok := p.delim()
		if !ok || !p.until(d) || !p.until(d) {
			return false
		}
	default:
		return false
	}
	return p.end()
}

// end reads what may follow a command: blanks, then a separator, "}", a comment or the end.
func (p *sedParser) end() bool {
	p.blanks()
	switch p.peek() {
	case 0, ';', '\n', '}', '#':
		return p.eof() || p.peek() != 0
	}
	return false
}

// address reads a line number, $ or /regex/ with flags I and M; ok is false when none is
// there, zero is true for line 0.
func (p *sedParser) address() (zero, ok bool) {
	switch c := p.peek(); {
	case c >= '0' && c <= '9':
		zero = true
		for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
			zero = zero && p.peek() == '0'
			p.i++
		}
	case c == '$':
		p.i++
	case c == '/':
		p.i++
		if !p.until('/') {
			p.i = len(p.s) + 1 // unterminated: make the caller fail
			return false, false
		}
		for p.peek() == 'I' || p.peek() == 'M' {
			p.i++
		}
	default:
		return false, false
	}
	return zero, true
}

// delim reads the delimiter of s or y: any character but a newline or a backslash.
func (p *sedParser) delim() (byte, bool) {
	if p.eof() || p.peek() == '\n' || p.peek() == '\\' {
		return 0, false
	}
	d := p.s[p.i]
	p.i++
	return d, true
}

// until reads up to and past the next unescaped d; a bare newline ends it in error.
func (p *sedParser) until(d byte) bool {
	for !p.eof() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.eof() {
				return false
			}
			p.i++
		case c == d:
			return true
		case c == '\n':
			return false
		}
	}
	return false
}

// substitute reads /regex/replacement/flags: g, p and a number (not 0) at most once each,
// as sed wants.
func (p *sedParser) substitute() bool {
	d, ok := p.delim()
	if !ok || !p.until(d) || !p.until(d) {
		return false
	}
	seen := map[byte]bool{}
	for !p.eof() {
		c := p.peek()
		switch {
		case c >= '0' && c <= '9':
			if seen['0'] || c == '0' {
				return false
			}
			for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
				p.i++
			}
			seen['0'] = true
			continue
		case strings.IndexByte("giImMp", c) < 0:
			return true
		case seen[c] && (c == 'g' || c == 'p'):
			return false
		}
		seen[c] = true
		p.i++
	}
	return true
}
