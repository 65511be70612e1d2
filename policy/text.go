package policy

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/paddockhq/paddock/script"
)

// String is the analysis as `paddock policy check` prints it: the grammar, one line per step
// (its verdict, its effects, the step as it runs; a step the bash tool fails before it runs
// says why, and what it would be as written), then the union of the effects. No effects read
// "-".
func (a Analysis) String() string {
	var b strings.Builder
	if a.Grammar == script.Exec {
		fmt.Fprintf(&b, "grammar: exec (%s): the whole script is one step\n", a.Reason)
	} else {
		b.WriteString("grammar: steps\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, s := range a.Steps {
		if s.Fails != "" {
			fmt.Fprintf(tw, "fails\t%s\t%s\t(%s; as written it would %s)\n", orNone(s.Effects), s.Command, s.Fails, s.Verdict)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Verdict, orNone(s.Effects), s.Command)
	}
	tw.Flush()
	fmt.Fprintf(&b, "effects: %s\n", orNone(a.Effects))
	return b.String()
}

// orNone is e as the analysis's text shows it: "-" for none.
func orNone(e Effects) string {
	if s := e.String(); s != "" {
		return s
	}
	return "-"
}
