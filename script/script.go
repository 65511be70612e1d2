// Package script reads an agent's shell script: whether it lies within the grammar that
// Paddock runs step by step on the host, and its steps. The policy and the bash tool both read
// a script through this package, so they always agree on what a step is.
package script

import (
	"fmt"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/errdefs"
)

// Grammar says how a script runs.
type Grammar string

const (
	// Steps: every simple command is a step, expanded on the host and run one by one.
	Steps Grammar = "steps"
	// Exec: the whole script is one step, run by bash -c in the sandbox.
	Exec Grammar = "exec"
)

// Script is a parsed script.
type Script struct {
	Source  string
	File    *syntax.File
	Grammar Grammar
	// Reason says why a script is outside the grammar ("" within it).
	Reason string
	// Steps are the script's simple commands in source order, nested ones included. Within
	// the grammar they are the steps; outside it they are the parts of the one exec step.
	Steps []*syntax.Stmt
}

// ParseError is a script that does not parse.
type ParseError struct {
	Err error
}

func (e *ParseError) Error() string { return "syntax: " + e.Err.Error() }
func (e *ParseError) Unwrap() error { return e.Err }

// Code is the stable code of a parse error.
func (e *ParseError) Code() string { return "syntax" }

// Class is the error's class.
func (e *ParseError) Class() errdefs.Class { return errdefs.InvalidArgument }

// Builtins run on the host within the grammar; their effects last for one call.
var hostBuiltins = map[string]bool{"cd": true, "export": true, "exit": true, "unset": true}

// shellOnly names bash builtins (and keywords used as commands) that are no program on any
// PATH: a script calling one runs whole under bash.
var shellOnly = map[string]bool{
	".": true, ":": true, "source": true, "alias": true, "unalias": true, "bg": true, "fg": true,
	"bind": true, "break": true, "continue": true, "builtin": true, "caller": true,
	"command": true, "compgen": true, "complete": true, "compopt": true, "declare": true,
	"typeset": true, "local": true, "readonly": true, "dirs": true, "pushd": true, "popd": true,
	"disown": true, "enable": true, "eval": true, "exec": true, "fc": true, "getopts": true,
	"hash": true, "help": true, "history": true, "jobs": true, "let": true, "logout": true,
	"mapfile": true, "readarray": true, "read": true, "return": true, "set": true,
	"shift": true, "shopt": true, "suspend": true, "times": true, "trap": true, "type": true,
	"ulimit": true, "umask": true, "wait": true, "coproc": true, "select": true,
	"function": true, "time": true,
}

var name = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse parses src as bash and decides its grammar.
func Parse(src string) (*Script, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, &ParseError{Err: err}
	}
	s := &Script{Source: src, File: f, Grammar: Steps}
	syntax.Walk(f, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok {
			switch st.Cmd.(type) {
			case *syntax.CallExpr, *syntax.DeclClause:
				s.Steps = append(s.Steps, st)
			}
		}
		return true
	})
	if reason := outside(f); reason != "" {
		s.Grammar, s.Reason = Exec, reason
	}
	return s, nil
}

// outside returns why f lies outside the grammar, or "".
func outside(f *syntax.File) string {
	for _, st := range f.Stmts {
		if r := list(st, false); r != "" {
			return r
		}
	}
	return ""
}

// list checks a statement joined by ; && || or |. inPipe is true inside a pipeline.
func list(st *syntax.Stmt, inPipe bool) string {
	switch {
	case st.Background:
		return "background job"
	case st.Coprocess || st.Disown:
		return "coprocess"
	case st.Negated:
		return "negated pipeline"
	}
	switch c := st.Cmd.(type) {
	case *syntax.BinaryCmd:
		if len(st.Redirs) > 0 {
			return "redirection of a list"
		}
		switch c.Op {
		case syntax.AndStmt, syntax.OrStmt:
			if inPipe {
				return "list inside a pipeline"
			}
			if r := list(c.X, false); r != "" {
				return r
			}
			return list(c.Y, false)
		case syntax.Pipe:
			if r := list(c.X, true); r != "" {
				return r
			}
			return list(c.Y, true)
		default:
			return "operator " + c.Op.String()
		}
	case *syntax.CallExpr:
		return call(st, c, inPipe)
	case *syntax.DeclClause:
		return decl(st, c, inPipe)
	case nil:
		return "redirection without a command"
	default:
		return fmt.Sprintf("%T", c)
	}
}

func call(st *syntax.Stmt, c *syntax.CallExpr, inPipe bool) string {
	for _, a := range c.Assigns {
		if r := assign(a); r != "" {
			return r
		}
	}
	if len(c.Args) == 0 {
		if len(st.Redirs) > 0 {
			return "redirection without a command"
		}
		if inPipe {
			return "assignment inside a pipeline"
		}
		return ""
	}
	for _, w := range c.Args {
		if r := word(w, true); r != "" {
			return r
		}
	}
	for _, rd := range st.Redirs {
		if r := redirect(rd); r != "" {
			return r
		}
	}
	prog, ok := Literal(c.Args[0])
	if !ok {
		return "command name from an expansion"
	}
	switch {
	case shellOnly[prog]:
		return "shell builtin " + prog
	case hostBuiltins[prog]:
		if inPipe || len(st.Redirs) > 0 || len(c.Assigns) > 0 {
			return "builtin " + prog + " in a pipeline or with redirections"
		}
		return builtinArgs(prog, c.Args[1:])
	}
	return ""
}

// builtinArgs checks the operands of a host builtin.
func builtinArgs(prog string, args []*syntax.Word) string {
	switch prog {
	case "cd":
		if len(args) > 1 {
			return "cd with options or several operands"
		}
		if len(args) == 1 {
			if s, ok := Literal(args[0]); ok && (s == "-" || strings.HasPrefix(s, "-")) {
				return "cd with options"
			}
		}
	case "exit":
		if len(args) > 1 {
			return "exit with several operands"
		}
	case "unset", "export":
		for _, a := range args {
			s, ok := Literal(a)
			if !ok {
				return prog + " of an expansion"
			}
			n, _, _ := strings.Cut(s, "=")
			if !name.MatchString(n) || (prog == "unset" && n != s) {
				return prog + " with options"
			}
		}
	}
	return ""
}

func decl(st *syntax.Stmt, d *syntax.DeclClause, inPipe bool) string {
	if d.Variant == nil || d.Variant.Value != "export" {
		return "shell builtin " + d.Variant.Value
	}
	if inPipe || len(st.Redirs) > 0 {
		return "builtin export in a pipeline or with redirections"
	}
	for _, a := range d.Args {
		if a.Name == nil {
			return "export with options"
		}
		if r := assign(a); r != "" {
			return r
		}
	}
	return ""
}

func assign(a *syntax.Assign) string {
	switch {
	case a.Append || a.Index != nil || a.Array != nil:
		return "array or append assignment"
	case a.Value == nil:
		return ""
	}
	if len(a.Value.Parts) > 0 {
		if l, ok := a.Value.Parts[0].(*syntax.Lit); ok && strings.HasPrefix(l.Value, "~") {
			return "tilde in an assignment"
		}
	}
	return word(a.Value, false)
}

func redirect(rd *syntax.Redirect) string {
	if rd.N != nil && !isDigits(rd.N.Value) {
		return "named file descriptor"
	}
	switch rd.Op {
	case syntax.RdrIn, syntax.RdrOut, syntax.AppOut, syntax.RdrAll:
		return word(rd.Word, true)
	case syntax.DplOut:
		s, ok := Literal(rd.Word)
		if !ok || !isDigits(s) {
			return "redirection " + rd.Op.String() + " to a non-number"
		}
		return ""
	default:
		return "redirection " + rd.Op.String()
	}
}

// word checks one word: literals, quotes, $NAME, ${NAME}, $?, a leading ~ or ~/, globs.
func word(w *syntax.Word, tilde bool) string {
	if w == nil {
		return ""
	}
	c := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
	if syntax.SplitBraces(c) {
		return "brace expansion"
	}
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				rest := p.Value[1:]
				if !tilde || (rest != "" && !strings.HasPrefix(rest, "/")) || (rest == "" && len(w.Parts) > 1) {
					return "tilde form"
				}
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
				case *syntax.ParamExp:
					if r := param(q); r != "" {
						return r
					}
				default:
					return fmt.Sprintf("%T in double quotes", q)
				}
			}
		case *syntax.ParamExp:
			if r := param(p); r != "" {
				return r
			}
		default:
			return fmt.Sprintf("%T", p)
		}
	}
	return ""
}

func param(p *syntax.ParamExp) string {
	if p.Excl || p.Length || p.Width || p.IsSet || p.Index != nil || p.Slice != nil ||
		p.Repl != nil || p.Names != 0 || p.Exp != nil || p.Param == nil || p.Flags != nil ||
		p.NestedParam != nil || len(p.Modifiers) > 0 {
		return "parameter expansion form"
	}
	if p.Param.Value != "?" && !name.MatchString(p.Param.Value) {
		return "special parameter $" + p.Param.Value
	}
	return ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Literal returns the value of a word made only of literal text and quotes (single, double,
// ANSI-C), with the quotes removed and ANSI-C escapes decoded; ok is false when the word
// holds an expansion or an unquoted glob or tilde.
func Literal(w *syntax.Word) (s string, ok bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[~") {
				return "", false
			}
			b.WriteString(unescape(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				v, err := ansiC(p.Value)
				if err != nil {
					return "", false
				}
				b.WriteString(v)
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, isLit := q.(*syntax.Lit)
				if !isLit {
					return "", false
				}
				b.WriteString(unescapeDouble(l.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape removes the backslashes of an unquoted literal.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble removes the backslashes that escape $ ` " \ or a newline in double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the escapes of a $'…' word as bash does.
func ansiC(s string) (string, error) {
	v, _, err := expand.Format(nil, s, nil)
	v, _, _ = strings.Cut(v, "\x00") // bash ends the word at a NUL
	return v, err
}

// Pipelines maps each command of a pipeline of two or more (a | b) to the pipeline's
// commands, left to right: they run at once.
func Pipelines(f *syntax.File) map[*syntax.Stmt][]*syntax.Stmt {
	out := map[*syntax.Stmt][]*syntax.Stmt{}
	var parts func(st *syntax.Stmt, acc []*syntax.Stmt) []*syntax.Stmt
	parts = func(st *syntax.Stmt, acc []*syntax.Stmt) []*syntax.Stmt {
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			return parts(b.Y, parts(b.X, acc))
		}
		return append(acc, st)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) {
			if _, inner := out[st]; !inner {
				members := parts(st, nil)
				for _, m := range members {
					out[m] = members
				}
				// The pipeline's inner statements (a | b within a | b | c) are part of it.
				syntax.Walk(st, func(n syntax.Node) bool {
					if s, ok := n.(*syntax.Stmt); ok && s != st {
						if _, seen := out[s]; !seen {
							out[s] = nil
						}
					}
					return true
				})
			}
		}
		return true
	})
	for k, v := range out {
		if v == nil {
			delete(out, k)
		}
	}
	return out
}
