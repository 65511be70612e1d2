package workspace

import (
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// One path's plan is exactly its row of the hand-back table.
//
// law: cow_plan
func TestPlanRows(t *testing.T) {
	for _, c := range []struct {
		name   string
		facts  []PathFacts
		path   string
		action Action
		reason string
	}{
		{"child did not change", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ParentChanged: true}}, "a", Keep, ""},
		{"only child changed", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ChildChanged: true}}, "a", Take, ""},
		{"only child removed", []PathFacts{{Path: "a", Base: File, Parent: File, Child: Absent, ChildChanged: true}}, "a", Take, ""},
		{"only child added", []PathFacts{{Path: "a", Base: Absent, Parent: Absent, Child: Symlink, ChildChanged: true}}, "a", Take, ""},
		{"both changed, same", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ChildChanged: true, ParentChanged: true, Same: true}}, "a", Same, ""},
		{"both removed", []PathFacts{{Path: "a", Base: File, Parent: Absent, Child: Absent, ChildChanged: true, ParentChanged: true, Same: true}}, "a", Same, ""},
		{"both changed, different", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ChildChanged: true, ParentChanged: true}}, "a", Conflict, ReasonBothChanged},
		{"both changed lines that merge", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ChildChanged: true, ParentChanged: true, Merge: MergeClean}}, "a", Merged, ""},
		{"both changed lines that conflict", []PathFacts{{Path: "a", Base: File, Parent: File, Child: File, ChildChanged: true, ParentChanged: true, Merge: MergeMarked}}, "a", Conflict, ReasonBothChanged},
		{"parent changed, child removed", []PathFacts{{Path: "a", Base: File, Parent: File, Child: Absent, ChildChanged: true, ParentChanged: true}}, "a", Conflict, ReasonBothChanged},
		{"a directory with entries where the child's file goes", []PathFacts{
			{Path: "d", Base: Dir, Parent: Dir, Child: File, ChildChanged: true},
			{Path: "d/p", Base: Absent, Parent: File, Child: Absent},
		}, "d", Conflict, ReasonParentDirectory},
		{"an emptied directory where the child's file goes", []PathFacts{
			{Path: "d", Base: Dir, Parent: Dir, Child: File, ChildChanged: true},
			{Path: "d/x", Base: File, Parent: File, Child: Absent, ChildChanged: true},
		}, "d", Take, ""},
		{"a file where the child's directory goes", []PathFacts{
			{Path: "d", Base: Dir, Parent: File, Child: Dir, ParentChanged: true},
			{Path: "d/n", Base: Absent, Parent: Absent, Child: File, ChildChanged: true},
		}, "d/n", Conflict, ReasonParentFileAbove},
		{"a symlink two levels up", []PathFacts{
			{Path: "d", Base: Dir, Parent: Symlink, Child: Dir, ParentChanged: true},
			{Path: "d/e", Base: Absent, Parent: Absent, Child: Dir, ChildChanged: true},
			{Path: "d/e/n", Base: Absent, Parent: Absent, Child: File, ChildChanged: true},
		}, "d/e/n", Conflict, ReasonParentFileAbove},
		{"a removed directory the parent added to", []PathFacts{
			{Path: "d", Base: Dir, Parent: Dir, Child: Absent, ChildChanged: true},
			{Path: "d/p", Base: Absent, Parent: File, Child: Absent},
		}, "d", Conflict, ReasonNotEmpty},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *Step
			for _, s := range Plan(c.facts) {
				if s.Path == c.path {
					got = &s
				}
			}
			if got == nil {
				t.Fatalf("no step for %s", c.path)
			}
			if got.Action != c.action || got.Reason != c.reason {
				t.Errorf("plan %s = %v %q, want %v %q", c.path, got.Action, got.Reason, c.action, c.reason)
			}
		})
	}
}

// factsOfModels gives the facts of every path of base, parent and child, line merges by m.
func factsOfModels(b, p, c tree, m merger) []PathFacts {
	all := map[string]bool{}
	for _, t := range []tree{b, p, c} {
		for q := range t {
			all[q] = true
		}
	}
	var fs []PathFacts
	for q := range all {
		f := PathFacts{
			Path: q, Base: b[q].Kind, Parent: p[q].Kind, Child: c[q].Kind,
			ChildChanged: !same(c, b, q), ParentChanged: !same(p, b, q), Same: same(p, c, q),
		}
		if _, clean, ok := lineMergeOf(m, b, p, c, q); ok && clean {
			f.Merge = MergeClean
		} else if ok {
			f.Merge = MergeMarked
		}
		fs = append(fs, f)
	}
	return fs
}

// applyPlan carries out steps on a model of the parent, as Handback does on disk, and
// reports a step that cannot be carried out as planned.
func applyPlan(t *testing.T, b, p, c tree, steps []Step, m merger) (r, k tree) {
	r, k = tree{}, tree{}
	for q, n := range p {
		r[q] = n
	}
	for _, s := range steps {
		switch s.Action {
		case Take:
			if old, ok := r[s.Path]; ok && old.Kind == Dir && s.Child != Dir && holdsUnder(r, s.Path) {
				t.Fatalf("step %+v: the directory still holds entries", s)
			}
			if s.Child == Absent {
				delete(r, s.Path)
				continue
			}
			for d := path.Dir(s.Path); d != "."; d = path.Dir(d) {
				if n, ok := r[d]; ok && n.Kind != Dir {
					t.Fatalf("step %+v: %s is a %v", s, d, n.Kind)
				}
				r[d] = node{Kind: Dir}
			}
			r[s.Path] = c[s.Path]
		case Merged:
			n, clean, ok := lineMergeOf(m, b, p, c, s.Path)
			if !ok || !clean {
				t.Fatalf("step %+v: no clean line merge", s)
			}
			r[s.Path] = n
		case Conflict:
			if s.Marked != "" {
				n, _, _ := lineMergeOf(m, b, p, c, s.Path)
				k[s.Marked] = node{Kind: File, Data: n.Data}
			}
			if s.Child != Absent {
				k[s.Path] = c[s.Path]
				for d := path.Dir(s.Path); d != "."; d = path.Dir(d) {
					k[d] = node{Kind: Dir}
				}
			}
		}
	}
	return r, k
}

func outcomeOf(steps []Step) outcome {
	o := outcome{conflicts: map[string]string{}, taken: map[string]bool{}, merged: map[string]bool{}, marked: map[string]string{}}
	for _, s := range steps {
		switch s.Action {
		case Merged:
			o.merged[s.Path] = true
		case Conflict:
			o.conflicts[s.Path] = s.Reason
			if s.Marked != "" {
				o.marked[s.Path] = s.Marked
			}
		case Take, Same:
			o.taken[s.Path] = true
		}
	}
	return o
}

// Over random base, parent and child trees, carrying out the plan keeps every law.
//
// law: cow_plan_is_merge
// law: cow_keeps_parent
// law: cow_takes_child
// law: cow_conflict_reported
// law: cow_conflict_is_real
// law: cow_merge_clean
// law: cow_merge_marked
func TestPlanProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		b := randomTree(rng)
		p, c := edit(rng, b), edit(rng, b)
		steps := Plan(factsOfModels(b, p, c, modelMerge))
		r, k := applyPlan(t, b, p, c, steps, modelMerge)
		if bad := checkLaws(b, p, c, r, k, outcomeOf(steps), modelMerge); len(bad) > 0 {
			t.Fatalf("case %d:\nbase %v\nparent %v\nchild %v\n%s", i, b, p, c, strings.Join(bad, "\n"))
		}
	}
}

func TestComparePaths(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"a", "a/b", -1}, {"a/b", "a-c", -1}, {"a-c", "a", 1}, {"a/b", "a/b", 0}, {"b", "a/z", 1}} {
		if got := comparePaths(c.a, c.b); got != c.want {
			t.Errorf("comparePaths(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
