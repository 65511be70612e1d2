package policy

// Programs configured by files the sandbox can write. A program the table judges by its
// arguments alone must not read, from a file a script may have just written, a
// configuration that runs a program or sends a file: the rule would be wrong. Each such
// program runs neutralised where it allows it; where it does not, its rule is exec.
//
//   - less reads ~/.lesskey (its #env section can set LESSOPEN, an input preprocessor it
//     runs): LESSSECURE=1 turns off lesskey files, LESSOPEN, shell and pipe commands, the
//     editor and log files — for every step, as less may also run as another program's pager.
//   - curl reads ~/.curlrc (upload-file, output, config of its own): -q as its first
//     argument makes it read none.
//   - wget reads ~/.wgetrc (post_file, output_document, execute): WGETRC names an empty one.
//   - git: GitArgv and GitEnv (git.go).

// StepEnv is set for every step the host runs in the sandbox, after the step's own
// environment: it wins over what a script exported.
var StepEnv = []string{"LESSSECURE=1", "WGETRC=/dev/null"}

// Harden returns the argv a step runs with and the variables it runs with besides StepEnv,
// and whether it changed anything: a hardened git (GitArgv, GitEnv), curl reading no
// configuration file. Any other argv is returned as it is.
func Harden(argv []string) (out, env []string, changed bool) {
	if out, ok := GitArgv(argv); ok {
		return out, GitEnv, true
	}
	if len(argv) > 0 && argv[0] == "curl" && (len(argv) < 2 || argv[1] != "-q" && argv[1] != "--disable") {
		return append([]string{"curl", "-q"}, argv[1:]...), nil, true
	}
	return argv, nil, false
}
