package workspace

import (
	"path"
	"slices"
	"strings"
)

// This file is the hand-back's decision: a pure function from the facts of each path to
// what becomes of it. It reads no disk; handback.go gathers the facts and carries out the
// plan. The table, per path (DESIGN.md "Workspaces"):
//
//	child did not change            -> parent's content                (Keep)
//	only the child changed          -> child's content, a removal too  (Take)
//	both changed, to the same       -> kept                            (Same)
//	both changed a text file, lines
//	  merge cleanly                 -> the merged content              (Merged)
//	both changed, differently       -> parent's content; conflict; child's version saved,
//	                                   and for a text file the marked merge beside it
//	parent cannot hold it as a file -> parent's entry; conflict; child's version saved
//
// A line merge is git's (git merge-file of the parent's, the base's and the child's
// content): it applies to a path that is a regular file in the base, the parent and the
// child, with the same permission bits in all three. Binary files, modes and symlinks keep
// the rest of the table. Whether the lines merge cleanly is a fact handback.go gathers
// (MergeOutcome); the plan only reads it.
//
// "Cannot hold" is structural: the child's entry needs a directory of the parent that is a
// file or symlink there (ParentFileAbove), or the child's file or removal needs a directory
// of the parent to go that still holds entries (ParentDirectory, NotEmpty).

// PathFacts are what the hand-back knows of one path: what the base, the parent and the
// child's copy hold there, and how their contents compare. Content is the kind, and for a
// file its permission bits and bytes, for a symlink its target; two directories are equal.
type PathFacts struct {
	Path          string // relative, with slashes
	Base          Kind
	Parent        Kind
	Child         Kind
	ChildChanged  bool // the child's entry differs from the base's
	ParentChanged bool // the parent's entry differs from the base's
	Same          bool // the parent's entry equals the child's
	// Merge is how git merges the lines of the three files, for a path both changed
	// differently that is a text file with the same mode in the base, the parent and the
	// child; NoMerge for every other path.
	Merge MergeOutcome
}

// MergeOutcome is what a three-way line merge of one path gave.
type MergeOutcome uint8

// Outcomes of a line merge.
const (
	NoMerge     MergeOutcome = iota // not merged by lines: not three text files of one mode
	MergeClean                      // merged with no conflicting hunk
	MergeMarked                     // conflicting hunks: the merge holds conflict markers
)

// Action is what the plan does with a path.
type Action uint8

// Actions of a plan.
const (
	Keep     Action = iota // the parent's entry stays: the child did not change it
	Take                   // the child's entry replaces the parent's (a removal too)
	Same                   // both changed it to the same content: the parent's stays
	Conflict               // the parent's entry stays; the child's version is saved
	Merged                 // the clean line merge of the parent's and the child's file replaces the parent's
)

func (a Action) String() string {
	return [...]string{"keep", "take", "same", "conflict", "merged"}[a]
}

// Reasons for a conflict.
const (
	ReasonBothChanged     = "both_changed"      // parent and child changed it differently
	ReasonParentDirectory = "parent_directory"  // the parent holds a directory with entries where the child has a file
	ReasonParentFileAbove = "parent_file_above" // the parent holds a file or symlink where one of its directories goes
	ReasonNotEmpty        = "not_empty"         // the child removed a directory the parent still holds entries in
)

// Step is the plan for one path.
type Step struct {
	Path   string
	Action Action
	Reason string // for a Conflict
	Child  Kind   // what the child holds: what Take writes (Absent: removes) or a Conflict saves
	Parent Kind   // what the parent holds
	Result Kind   // what the parent holds once the plan is carried out
	// Marked, for a Conflict whose lines did not merge cleanly, is where the marked merge
	// is kept: a path relative to the conflicts directory, beside the child's version
	// (PATH.merge, or PATH.merge.merge … where that name is another saved path).
	Marked string
}

// Plan decides every path. facts must hold each path at most once, and, for every path
// the child changed, its ancestors, and every entry the parent holds under a directory
// the child removes or replaces by a file; a missing path is taken as one the child did
// not change. The steps come in the order to carry them out: removals deepest first, then
// the rest parents first.
func Plan(facts []PathFacts) []Step {
	fs := slices.Clone(facts)
	slices.SortFunc(fs, func(a, b PathFacts) int { return comparePaths(a.Path, b.Path) })
	result := make(map[string]Kind, len(fs))
	steps := make([]Step, len(fs))
	held := map[string]bool{} // directories whose result holds an entry

	// Removals, and paths the child did not change, deepest first: a directory's removal
	// needs to know whether anything stays in it.
	for i := len(fs) - 1; i >= 0; i-- {
		f := fs[i]
		s := Step{Path: f.Path, Child: f.Child, Parent: f.Parent, Result: f.Parent}
		switch {
		case !f.ChildChanged:
			s.Action = Keep
		case f.Child != Absent:
			continue // decided below, parents first
		case f.ParentChanged && f.Same:
			s.Action = Same
		case f.ParentChanged:
			s.Action, s.Reason = Conflict, ReasonBothChanged
		case f.Parent == Dir && held[f.Path]:
			s.Action, s.Reason = Conflict, ReasonNotEmpty
		default:
			s.Action, s.Result = Take, Absent
		}
		steps[i] = s
		result[f.Path] = s.Result
		if s.Result != Absent {
			held[path.Dir(f.Path)] = true
		}
	}
	// What the child added or changed, parents first: an entry needs its directories.
	for i, f := range fs {
		if !f.ChildChanged || f.Child == Absent {
			continue
		}
		s := Step{Path: f.Path, Child: f.Child, Parent: f.Parent, Result: f.Parent}
		switch {
		case blocked(f.Path, result):
			s.Action, s.Reason = Conflict, ReasonParentFileAbove
		case f.ParentChanged && f.Same:
			s.Action = Same
		case f.ParentChanged && f.Merge == MergeClean:
			s.Action, s.Result = Merged, File
		case f.ParentChanged:
			s.Action, s.Reason = Conflict, ReasonBothChanged
		case f.Parent == Dir && f.Child != Dir && held[f.Path]:
			s.Action, s.Reason = Conflict, ReasonParentDirectory
		default:
			s.Action, s.Result = Take, f.Child
		}
		steps[i] = s
		result[f.Path] = s.Result
	}
	markMerges(fs, steps)
	// Order: removals deepest first, then everything else parents first.
	var out []Step
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Action == Take && steps[i].Child == Absent {
			out = append(out, steps[i])
		}
	}
	for _, s := range steps {
		if !(s.Action == Take && s.Child == Absent) {
			out = append(out, s)
		}
	}
	return out
}

// markMerges names where each unclean line merge is kept under the conflicts directory:
// PATH.merge, with ".merge" added again while the name is taken by a saved version of the
// child, a directory above one, or another marked merge.
func markMerges(fs []PathFacts, steps []Step) {
	taken := map[string]bool{}
	for _, s := range steps {
		if s.Action == Conflict && s.Child != Absent {
			for p := s.Path; p != "."; p = path.Dir(p) {
				taken[p] = true
			}
		}
	}
	for i, f := range fs {
		s := &steps[i]
		if s.Action != Conflict || s.Reason != ReasonBothChanged || f.Merge != MergeMarked {
			continue
		}
		name := s.Path + ".merge"
		for taken[name] {
			name += ".merge"
		}
		taken[name] = true
		s.Marked = name
	}
}

// blocked reports whether an ancestor of p ends as a file or symlink below every ancestor
// that ends as a directory: the parent cannot hold p there. An ancestor that ends absent is
// made as a directory when p is written.
func blocked(p string, result map[string]Kind) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		switch result[d] {
		case File, Symlink:
			return true
		case Dir:
			return false
		}
	}
	return false
}

// comparePaths orders paths element by element, so every directory comes right before
// what it holds.
func comparePaths(a, b string) int {
	for {
		ai, bi := strings.IndexByte(a, '/'), strings.IndexByte(b, '/')
		ae, be := a, b
		if ai >= 0 {
			ae = a[:ai]
		}
		if bi >= 0 {
			be = b[:bi]
		}
		if c := strings.Compare(ae, be); c != 0 {
			return c
		}
		if ai < 0 || bi < 0 {
			switch {
			case ai < 0 && bi < 0:
				return 0
			case ai < 0:
				return -1
			}
			return 1
		}
		a, b = a[ai+1:], b[bi+1:]
	}
}
