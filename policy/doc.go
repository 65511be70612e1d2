// Package policy holds Paddock's pure decisions about shell steps and paths: the effects a
// step has (read, write, exec, net, outside, protected, secret), the class of a host path
// (Secret, Protected, Inside, Outside) judged on its real location, and whether a step runs
// at once or asks a person (the auto set).
//
// Nothing here starts a process or talks to a sandbox: the facts a decision needs — the
// working directory, the environment, the workspace roots, the path map, the symlinks on
// disk — come in through a Context, and disk facts only through the small FS interface, so
// every rule can be tested with a map-backed fake as well as a real temporary tree.
//
// Where each rule lives:
//
//	effects.go   the effect names and the Effects set
//	auto.go      the auto set and run-or-ask
//	real.go      a path's real location (symlinks, "..", loops)
//	class.go     a host path's class and the entries behind it
//	step.go      one expanded step's effects: words, redirections, assignments, cwd
//	commands.go  the command table: each command's own effects and which words are paths
//	git.go       git's rules and the hardened argument list it runs with
//	sed.go       sed's known-safe scripts
//	check.go     a whole script without running it (paddock policy check)
//	quote.go     a step shown exactly as it runs
package policy
