package policy

import "testing"

// An analysis's text: the grammar, a line per step (a step the bash tool fails says why),
// the union of the effects; "-" for none.
func TestAnalysisString(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	ctx.Env = append(ctx.Env, "EMPTY=")
	for _, tc := range []struct{ src, want string }{
		{"pwd", "grammar: steps\nrun  -  pwd\neffects: -\n"},
		{"cat src/main.go | wc -l", "grammar: steps\nrun  read  cat src/main.go\nrun  read  wc -l\neffects: read\n"},
		{"if true; then pwd; fi", "grammar: exec (*syntax.IfClause): the whole script is one step\nrun  exec  bash -c 'if true; then pwd; fi'\neffects: exec\n"},
		{"echo x > $EMPTY", "grammar: steps\nfails  protected,write  echo x > $EMPTY  ($EMPTY: ambiguous redirect; as written it would run)\neffects: protected,write\n"},
	} {
		if got := check(t, ctx, tc.src).String(); got != tc.want {
			t.Errorf("%q:\ngot  %q\nwant %q", tc.src, got, tc.want)
		}
	}
}
