package workspace

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
)

// This file holds the hand-back's laws as one checker, used by the pure plan's property
// test (over models) and by the on-disk one (over real trees).

func get(t tree, p string) (node, bool) { n, ok := t[p]; return n, ok }

func same(a tree, b tree, p string) bool {
	x, xok := a[p]
	y, yok := b[p]
	return xok == yok && x == y
}

func holdsUnder(t tree, p string) bool {
	for q := range t {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

// outcome is what a hand-back reported: conflicts by path with their reason, the paths it
// took, the paths it merged by lines, and where it kept each marked merge.
type outcome struct {
	conflicts map[string]string
	taken     map[string]bool
	merged    map[string]bool
	marked    map[string]string // path -> its marked merge, relative to conflicts/
}

// merger is a line merge of three files' contents: what it gives, whether it was clean,
// and false when the files cannot be merged by lines. The model's (modelMerge) and git's
// (gitMerge) are both held to the laws.
type merger func(base, parent, child string) (out string, clean, ok bool)

// mergeable reports whether the laws merge q by lines: a file in the base, the parent and
// the child, of one mode, that both changed differently.
func mergeable(b, p, c tree, q string) bool {
	x, xok := b[q]
	y, yok := p[q]
	z, zok := c[q]
	return xok && yok && zok && x.Kind == File && y.Kind == File && z.Kind == File &&
		x.Exec == y.Exec && y.Exec == z.Exec && x != y && x != z && y != z
}

// lineMerge is what m gives for q, by the laws: ok only when q is mergeable.
func lineMergeOf(m merger, b, p, c tree, q string) (out node, clean, ok bool) {
	if !mergeable(b, p, c, q) {
		return node{}, false, false
	}
	s, clean, ok := m(b[q].Data, p[q].Data, c[q].Data)
	return node{Kind: File, Data: s, Exec: p[q].Exec}, clean, ok
}

// modelMerge merges the model's files by lines, as git does them: each is three lines
// whose middle one no edit changes, so two edits meet only on the same line, and a line
// both changed differently is a conflicting hunk. A file holding a NUL is binary.
func modelMerge(base, parent, child string) (string, bool, bool) {
	if strings.ContainsRune(base+parent+child, 0) {
		return "", false, false
	}
	b, p, c := strings.Split(base, "\n"), strings.Split(parent, "\n"), strings.Split(child, "\n")
	if len(b) != len(p) || len(b) != len(c) {
		return "", false, false
	}
	out, clean := make([]string, len(b)), true
	for i := range b {
		switch {
		case p[i] == b[i]:
			out[i] = c[i]
		case c[i] == b[i], c[i] == p[i]:
			out[i] = p[i]
		default:
			out[i], clean = "<"+p[i]+"|"+c[i]+">", false
		}
	}
	return strings.Join(out, "\n"), clean, true
}

// checkLaws returns every way the merged parent r and the saved conflicts k break the
// hand-back's laws for base b, parent p and child c.
func checkLaws(b, p, c, r, k tree, o outcome, m merger) []string {
	var bad []string
	fail := func(law, path, format string, args ...any) {
		bad = append(bad, fmt.Sprintf("%s at %q: %s (base %s, parent %s, child %s, result %s)", law, path,
			fmt.Sprintf(format, args...), show(get(b, path)), show(get(p, path)), show(get(c, path)), show(get(r, path))))
	}
	all := map[string]bool{}
	for _, t := range []tree{b, p, c, r} {
		for q := range t {
			all[q] = true
		}
	}
	paths := make([]string, 0, len(all))
	for q := range all {
		paths = append(paths, q)
	}
	sort.Strings(paths)
	// A directory the parent removed may come back to hold what the child added in it.
	recreated := func(q string) bool {
		n, ok := r[q]
		_, pok := p[q]
		return ok && n.Kind == Dir && !pok && holdsUnder(r, q)
	}
	for _, q := range paths {
		childChanged := !same(c, b, q)
		parentChanged := !same(p, b, q)
		reason, conflict := o.conflicts[q]
		merge, clean, canMerge := lineMergeOf(m, b, p, c, q)
		merged := o.merged[q]
		// law: cow_merge_clean
		if canMerge && clean && (!merged || !same(r, tree{q: merge}, q)) {
			fail("cow_merge_clean", q, "both changed its lines and they merge cleanly, but it was not merged (reported merged %v)", merged)
		}
		if merged && (!canMerge || !clean) {
			fail("cow_merge_clean", q, "reported merged, but its lines do not merge cleanly")
		}
		if merged && (conflict || o.taken[q]) {
			fail("report", q, "reported merged and taken or conflicted")
		}
		// law: cow_merge_marked
		if canMerge && !clean {
			name, ok := o.marked[q]
			if !conflict || !ok {
				fail("cow_merge_marked", q, "its lines conflict, but no conflict keeps the marked merge (conflict %v, marked %q)", conflict, name)
			} else if n, ok := k[name]; !ok || n.Kind != File || n.Data != merge.Data {
				fail("cow_merge_marked", q, "the marked merge kept at %q is %s, want %q", name, show(n, ok), merge.Data)
			}
		}
		if name, ok := o.marked[q]; ok && (!canMerge || clean) {
			fail("cow_merge_marked", q, "a marked merge at %q where the lines did not conflict", name)
		}
		// law: cow_keeps_parent
		if !childChanged && !same(r, p, q) && !recreated(q) {
			fail("cow_keeps_parent", q, "the child did not change it but the parent's entry was not kept")
		}
		// law: cow_takes_child
		if childChanged && !parentChanged && !same(r, c, q) {
			switch {
			case !conflict:
				fail("cow_takes_child", q, "only the child changed it, it was not taken, and no conflict says why")
			case reason == ReasonBothChanged:
				fail("cow_takes_child", q, "only the child changed it, yet a both_changed conflict")
			}
		}
		// law: cow_conflict_is_real
		if conflict {
			if !childChanged {
				fail("cow_conflict_is_real", q, "a conflict where the child changed nothing")
			}
			if reason == ReasonBothChanged && (!parentChanged || same(p, c, q)) {
				fail("cow_conflict_is_real", q, "a both_changed conflict where both did not change it differently")
			}
			switch reason {
			case ReasonParentFileAbove:
				found := false
				for d := path.Dir(q); d != "."; d = path.Dir(d) {
					if n, ok := r[d]; ok && (n.Kind == File || n.Kind == Symlink) {
						found = true
					}
				}
				if !found {
					fail("cow_conflict_is_real", q, "parent_file_above with no file above")
				}
			case ReasonParentDirectory, ReasonNotEmpty:
				if n, ok := r[q]; !ok || n.Kind != Dir || !holdsUnder(r, q) {
					fail("cow_conflict_is_real", q, "%s but the parent holds no directory with entries", reason)
				}
			}
		}
		// law: cow_conflict_reported
		if childChanged && parentChanged && !same(p, c, q) && !merged {
			if !conflict {
				fail("cow_conflict_reported", q, "both changed it differently and no conflict was reported")
			}
			if !same(r, p, q) && !recreated(q) {
				fail("cow_conflict_reported", q, "both changed it differently and the parent's entry was not kept")
			}
		}
		// Nothing either side wrote is lost.
		if childChanged && !same(r, c, q) && !merged {
			if !conflict {
				fail("no_loss", q, "the child's version was neither taken nor reported")
			} else if _, ok := c[q]; ok && !same(k, c, q) {
				fail("no_loss", q, "the child's version is not under conflicts/ (saved %s)", show(get(k, q)))
			}
		}
		if parentChanged && !same(r, p, q) && !recreated(q) && !merged {
			fail("no_loss", q, "the parent's change was lost")
		}
		if o.taken[q] && !same(r, c, q) {
			fail("report", q, "reported taken but the parent does not hold the child's version")
		}
		if o.taken[q] && conflict {
			fail("report", q, "reported both taken and conflicted")
		}
	}
	return bad
}

// randomTree makes a small tree over few names, so that edits of the parent and the child
// meet often.
func randomTree(rng *rand.Rand) tree {
	t := tree{}
	var fill func(dir string, depth int)
	fill = func(dir string, depth int) {
		for _, name := range []string{"a", "b", "c"} {
			if rng.IntN(3) == 0 {
				continue
			}
			p := path.Join(dir, name)
			switch rng.IntN(5) {
			case 0, 1:
				if depth < 3 {
					t[p] = node{Kind: Dir}
					fill(p, depth+1)
					continue
				}
				fallthrough
			case 2, 3:
				t[p] = randomFile(rng)
			case 4:
				t[p] = node{Kind: Symlink, Data: []string{"a", "b", "../x"}[rng.IntN(3)]}
			}
		}
	}
	fill("", 0)
	return t
}

// randomFile is one of a few contents: three lines whose middle one never changes (edits
// that meet on one line conflict, others merge), a binary one, and one of another length.
func randomFile(rng *rand.Rand) node {
	data := []string{"1\nm\n1\n", "1\nm\n2\n", "2\nm\n1\n", "2\nm\n2\n", "bin\x00", "three"}
	return node{Kind: File, Data: data[rng.IntN(len(data))], Exec: rng.IntN(4) == 0}
}

// edit returns t changed by a few random edits, keeping it a tree.
func edit(rng *rand.Rand, t tree) tree {
	out := tree{}
	for p, n := range t {
		out[p] = n
	}
	for range rng.IntN(5) {
		var p string
		if len(out) > 0 && rng.IntN(3) > 0 {
			keys := make([]string, 0, len(out))
			for q := range out {
				keys = append(keys, q)
			}
			sort.Strings(keys)
			p = keys[rng.IntN(len(keys))]
			if rng.IntN(2) == 0 {
				p = path.Join(p, []string{"a", "b", "n"}[rng.IntN(3)])
			}
		} else {
			p = []string{"a", "b", "c", "n", "a/n", "b/c/n"}[rng.IntN(6)]
		}
		if strings.Count(p, "/") > 3 {
			continue
		}
		removeUnder := func(q string) {
			for x := range out {
				if strings.HasPrefix(x, q+"/") {
					delete(out, x)
				}
			}
		}
		var n node
		switch rng.IntN(5) {
		case 0: // remove
			delete(out, p)
			removeUnder(p)
			continue
		case 1:
			n = node{Kind: Dir}
		case 2:
			n = node{Kind: Symlink, Data: []string{"a", "b"}[rng.IntN(2)]}
		default:
			n = randomFile(rng)
			if old, ok := out[p]; ok && old.Kind == File && rng.IntN(2) == 0 {
				n = old
				n.Exec = !n.Exec
			}
		}
		// Directories above p, replacing whatever is there.
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if m, ok := out[d]; ok && m.Kind != Dir {
				delete(out, d)
			}
			out[d] = node{Kind: Dir}
		}
		if n.Kind != Dir {
			removeUnder(p)
		}
		out[p] = n
	}
	return out
}
