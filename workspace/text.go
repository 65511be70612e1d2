package workspace

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// String is the clone's report as a person reads it: what was cloned where, the counts, how
// many files were cloned by extents and how many copied, and the time it took.
func (c *CloneReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cloned %s into %s\n", c.Parent, c.Dir)
	fmt.Fprintf(&b, "  %d files (%d bytes), %d symlinks, %d directories\n", c.Files, c.Bytes, c.Symlinks, c.Dirs)
	fmt.Fprintf(&b, "  %d cloned by extents, %d copied by bytes (%d bytes)\n", c.Cloned, c.Copied, c.CopiedB)
	fmt.Fprintf(&b, "  %s\n", c.Elapsed.Round(time.Millisecond))
	return b.String()
}

// String is the hand-back's report as a person reads it: the counts, then a line per path
// taken (A added, M modified, D removed) and per conflict, with where the child's version is.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "handed back %s into %s: %d taken, %d conflicts (%d paths listed, %d changed by the child, %d new ones ignored)\n",
		filepath.Join(r.Dir, CopyDir), r.Parent, r.Counts.Taken, r.Counts.Conflicts,
		r.Counts.Listed, r.Counts.Changed, r.Counts.Ignored)
	mark := map[string]string{"added": "A", "modified": "M", "removed": "D"}
	for _, c := range r.Taken {
		fmt.Fprintf(&b, "  %s %s\n", mark[c.Change], c.Path)
	}
	for _, c := range r.Conflicts {
		where := "the child removed it"
		if c.Saved != "" {
			where = "the child's version is at " + filepath.Join(r.Dir, filepath.FromSlash(c.Saved))
		}
		fmt.Fprintf(&b, "  C %s (%s; parent holds %s): %s\n", c.Path, c.Reason, c.Parent, where)
	}
	return b.String()
}
