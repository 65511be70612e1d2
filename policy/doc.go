// Package policy holds Paddock's pure decisions about shell steps and paths: the effects a
// step has (read, write, exec, net, outside, protected, secret), the class of a host path
// (Secret, Protected, Inside, Outside) judged on its real location, whether a step runs at
// once or asks a person (the auto set), and where a question goes.
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
//	route.go     rules before the auto set, the route of a question, the gateway rule
//	context.go   the facts of a session, and how a step's paths reach their class
//	fs.go        the FS interface: the real disk (OSFS) and an in-memory fake (MapFS)
//	real.go      a path's real location (symlinks, "..", loops)
//	class.go     a host path's class and the entries behind it
//	step.go      one expanded step's effects: words, redirections, assignments, cwd
//	options.go   how a command line splits into options, values and operands
//	commands.go  the command table: each command's own effects and which words are paths
//	git.go       git's rules and the hardened argument list it runs with
//	sed.go       sed's known-safe scripts
//	check.go     a whole script without running it (paddock policy check)
//	quote.go     a step shown exactly as it runs
package policy
