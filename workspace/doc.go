// Package workspace makes isolated workspaces for subagents and merges them back.
//
// An isolated workspace is two copies of the parent's listed files (List): the base, the
// tree as the child found it, and the child's copy, where the child works. Clone makes both
// with extent clones where the filesystem can (FICLONE on XFS and btrfs, clonefile on APFS)
// and records a manifest of stat facts. Handback merges the copy back into the parent path
// by path, following the table in plan.go: a path the child did not change keeps the
// parent's content, a path only the child changed takes the child's, and a path both
// changed differently keeps the parent's with the child's version saved under conflicts/.
//
// Every write to the parent is one rename (or exchange) from a sibling with a fixed name, so
// a hand-back cut at any moment reruns from the start to the same tree and the same report.
package workspace
