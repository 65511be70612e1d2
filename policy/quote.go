package policy

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote writes argv as a person should see it: exactly as it runs, each word quoted so that
// bash reads it back unchanged. A word with a control character, a bidi control or another
// invisible format character, or bytes that are not UTF-8, is written as $'…' with those
// bytes escaped as \xHH (whatever bash's locale); a word with shell syntax in single
// quotes; a plain word as it is. A NUL, which no argument can hold, is written \x00.
//
// Law: parsing Quote(argv) as bash gives back argv word for word.
func Quote(argv []string) string {
	var b strings.Builder
	for i, w := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		quoteWord(&b, w, i == 0)
	}
	return b.String()
}

// QuoteWord quotes one word as Quote does.
func QuoteWord(w string) string {
	var b strings.Builder
	quoteWord(&b, w, false)
	return b.String()
}

func quoteWord(b *strings.Builder, w string, first bool) {
	switch {
	case w == "":
		b.WriteString("''")
	case hidden(w):
		ansiQuote(b, w)
	case plainWord(w, first) && !(first && reserved[w]):
		b.WriteString(w)
	default:
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
}

// reserved are the words bash reads as syntax in a command's first place.
var reserved = map[string]bool{
	"!": true, "{": true, "}": true, "[[": true, "]]": true, "case": true, "coproc": true,
	"do": true, "done": true, "elif": true, "else": true, "esac": true, "fi": true, "for": true,
	"function": true, "if": true, "in": true, "select": true, "then": true, "time": true,
	"until": true, "while": true,
}

// plainWord reports whether w needs no quotes: only letters, digits and _ @ % + : , . / -,
// and = but in a first word (which would be an assignment).
func plainWord(w string, first bool) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("_@%+:,./-", c) >= 0:
		case c == '=' && !first:
		default:
			return false
		}
	}
	return true
}

// hidden reports whether w holds a byte or character a person could not see as written.
func hidden(w string) bool {
	for i := 0; i < len(w); {
		r, size := utf8.DecodeRuneInString(w[i:])
		if invisible(r, size) {
			return true
		}
		i += size
	}
	return false
}

// invisible reports whether a rune (or an invalid byte) must be escaped.
func invisible(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true // bidi controls, zero-width characters, line and paragraph separators
	case unicode.IsSpace(r) && r != ' ':
		return true // no-break and other odd spaces
	}
	return false
}

// ansiQuote writes w as $'…': printable characters as they are (\ and ' escaped), every
// other byte as \xHH.
func ansiQuote(b *strings.Builder, w string) {
	const hex = "0123456789abcdef"
	b.WriteString("$'")
	for i := 0; i < len(w); {
		r, size := utf8.DecodeRuneInString(w[i:])
		switch {
		case invisible(r, size):
			for _, c := range []byte(w[i : i+size]) {
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			}
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(w[i : i+size])
		}
		i += size
	}
	b.WriteByte('\'')
}
