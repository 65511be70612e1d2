package script

import (
	"errors"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

func TestGrammar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src   string
		want  Grammar
		steps int
	}{
		{"echo hi", Steps, 1},
		{"a | b | c", Steps, 3},
		{"a && b || c; d", Steps, 4},
		{"cat < in > out 2>&1 >> app &> all", Steps, 1},
		{`echo "$HOME" ${X} $? ~ ~/a 'q' $'\x41' *.go a?[bc]`, Steps, 1},
		{"X=1 Y=$HOME env", Steps, 1},
		{"X=1", Steps, 1},
		{"export A=1 B; cd /tmp; exit 3; unset A", Steps, 4},
		{"cd", Steps, 1},
		{"if true; then echo; fi", Exec, 2},
		{"f() { echo; }", Exec, 1},
		{"(cd x && ls)", Exec, 2},
		{"echo $(date)", Exec, 2},
		{"echo `date`", Exec, 2},
		{"cat <(ls)", Exec, 2},
		{"cat <<EOF\nx\nEOF", Exec, 1},
		{"sleep 1 &", Exec, 1},
		{"! false", Exec, 1},
		{"echo {a,b}", Exec, 1},
		{"echo ${X:-d}", Exec, 1},
		{"echo $1 $@", Exec, 1},
		{"echo $((1+2))", Exec, 1},
		{"source x", Exec, 1},
		{". x", Exec, 1},
		{"$cmd -rf build", Exec, 1},
		{"cd x | cat", Exec, 2},
		{"export -n A", Exec, 1},
		{"declare A=1", Exec, 1},
		{"> file", Exec, 0},
		{"echo ~root", Exec, 1},
		{"a |& b", Exec, 2},
		{"cat <> f", Exec, 1},
		{"echo hi >&-", Exec, 1},
		{"A=~/x cmd", Exec, 1},
		{"for i in 1 2; do echo $i; done", Exec, 1},
	} {
		s, err := Parse(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if s.Grammar != tc.want || len(s.Steps) != tc.steps {
			t.Errorf("%q: grammar %s (%s), %d steps; want %s, %d", tc.src, s.Grammar, s.Reason, len(s.Steps), tc.want, tc.steps)
		}
	}
}

func TestParseError(t *testing.T) {
	t.Parallel()
	_, err := Parse("echo 'unclosed")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Code() != "syntax" {
		t.Fatalf("err = %v, want a ParseError", err)
	}
}

func TestLiteral(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want string
		ok   bool
	}{
		{`rm`, "rm", true},
		{`$'\x72\x6d'`, "rm", true},
		{`"r"'m'`, "rm", true},
		{`r\m`, "rm", true},
		{`"a\"b\\c\d"`, `a"b\c\d`, true},
		{`$x`, "", false},
		{`*.go`, "", false},
		{`~`, "", false},
		{`"$x"`, "", false},
	} {
		s, err := Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Literal(s.Steps[0].Cmd.(*syntax.CallExpr).Args[0])
		if got != tc.want || ok != tc.ok {
			t.Errorf("Literal(%s) = %q, %v; want %q, %v", tc.src, got, ok, tc.want, tc.ok)
		}
	}
}
