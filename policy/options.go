package policy

import "strings"

// spec describes the options of one command, enough to tell options, their values and
// operands apart. Long options follow GNU getopt_long: "--name=value" or "--name value"
// for one that takes a value, and any prefix of a name stands for it.
type spec struct {
	// short lists the short options that take a value ("o" for "-o FILE" or "-oFILE").
	short string
	// shortOpt lists the short options whose value is optional and only attached ("-i.bak").
	shortOpt string
	// long lists the long options that take a value.
	long []string
	// longOpt lists the long options whose value is optional (only with "=").
	longOpt []string
	// flags lists other long options, so that an exact name wins over a longer one it is a
	// prefix of (git's --text is not --textconv).
	flags []string
	// inOrder: options end at the first operand (as in git, env, find).
	inOrder bool
}

// opt is one option as written.
type opt struct {
	short    byte     // the letter of a short option; 0 for a long one
	names    []string // a long option: every known name it stands for (itself when unknown)
	value    string
	hasValue bool
}

// args is a command line split by a spec.
type args struct {
	opts     []opt
	operands []string
	// dashdash is the index in operands of the first operand after "--" (-1: none).
	dashdash int
}

// parse splits words by the spec.
func (s *spec) parse(words []string) args {
	a := args{dashdash: -1}
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--":
			a.dashdash = len(a.operands)
			a.operands = append(a.operands, words[i+1:]...)
			return a
		case len(w) < 2 || w[0] != '-':
			if s.inOrder {
				a.operands = append(a.operands, words[i:]...)
				return a
			}
			a.operands = append(a.operands, w)
		case w[1] == '-':
			o, takes := s.readLong(w[2:])
			if takes && !o.hasValue && i+1 < len(words) {
				i++
				o.value, o.hasValue = words[i], true
			}
			a.opts = append(a.opts, o)
		default:
			for j := 1; j < len(w); j++ {
				c := w[j]
				o := opt{short: c}
				switch {
				case strings.IndexByte(s.short, c) >= 0:
					if j+1 < len(w) {
						o.value, o.hasValue = w[j+1:], true
					} else if i+1 < len(words) {
						i++
						o.value, o.hasValue = words[i], true
					}
					j = len(w)
				case strings.IndexByte(s.shortOpt, c) >= 0:
					o.value, o.hasValue = w[j+1:], j+1 < len(w)
					j = len(w)
				}
				a.opts = append(a.opts, o)
			}
		}
	}
	return a
}

// readLong reads "name" or "name=value" (after the dashes): the names it stands for and
// whether it takes the next word as its value.
func (s *spec) readLong(w string) (o opt, takes bool) {
	name, value, eq := strings.Cut(w, "=")
	o.value, o.hasValue = value, eq
	exact := func(list []string) bool {
		for _, n := range list {
			if n == name {
				return true
			}
		}
		return false
	}
	switch {
	case exact(s.long):
		return opt{names: []string{name}, value: value, hasValue: eq}, true
	case exact(s.longOpt), exact(s.flags):
		return opt{names: []string{name}, value: value, hasValue: eq}, false
	}
	for _, list := range [][]string{s.long, s.longOpt, s.flags} {
		for _, n := range list {
			if strings.HasPrefix(n, name) && name != "" {
				o.names = append(o.names, n)
			}
		}
	}
	for _, n := range s.long {
		if strings.HasPrefix(n, name) && name != "" {
			takes = true
		}
	}
	if len(o.names) == 0 {
		o.names = []string{name}
	}
	return o, takes
}

// is reports whether o is one of the options named: "-o" a short one, "--output" a long
// one (an abbreviation counts as every name it is a prefix of).
func (o opt) is(names ...string) bool {
	for _, n := range names {
		if len(n) == 2 && n[0] == '-' {
			if o.short == n[1] {
				return true
			}
			continue
		}
		long := strings.TrimPrefix(n, "--")
		for _, m := range o.names {
			if m == long {
				return true
			}
		}
	}
	return false
}

// has reports whether any of the options named is given.
func (a *args) has(names ...string) bool {
	for _, o := range a.opts {
		if o.is(names...) {
			return true
		}
	}
	return false
}

// values returns the values given to the options named.
func (a *args) values(names ...string) []string {
	var out []string
	for _, o := range a.opts {
		if o.hasValue && o.is(names...) {
			out = append(out, o.value)
		}
	}
	return out
}
