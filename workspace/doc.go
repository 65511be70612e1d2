// Package workspace makes isolated workspaces for subagents and merges them back.
//
// An isolated workspace is two copies of the parent's listed files (List): the base, the
// tree as the child found it, and the child's copy, where the child works. Clone makes both
// with extent clones where the filesystem can (FICLONE on XFS and btrfs, clonefile on APFS)
// and records a manifest of stat facts; CloneGroup makes several that start together with
// one listing and one base they share. On btrfs, a parent that is the root of a subvolume
// gets two snapshots instead, made at once whatever it holds.
//
// Handback merges the copy back into the parent path by path, following the table in
// plan.go: a path the child did not change keeps the parent's content, a path only the
// child changed takes the child's, a text file both changed is merged by lines as git
// merge-file merges it, and a path both changed otherwise keeps the parent's with the
// child's version (and a text file's marked merge) saved under conflicts/.
//
// Every write to the parent is one rename (or exchange) from a sibling with a fixed name,
// and the line merges taken are journalled before the first, so a hand-back cut at any
// moment reruns from the start to the same tree and the same report.
package workspace
