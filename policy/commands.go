package policy

import (
	"path"
	"strings"
)

// use gathers what one command does: its own effects, the words it names as paths, and the
// paths it only reads (the directory it reads because it names no path, the pathspecs of
// a git command that writes only the repository).
type use struct {
	ctx   *Context
	dir   string // paths are relative to it, itself relative to the step's cwd (git -C)
	own   Effects
	paths []string
	reads []string
	depth int // shells inside shells judged on the way here (opaqueShell)
	// moves are names a command moves or copies into other directories: a relative symlink
	// among them will point from its new directory (ps.movedLinks).
	moves []move
	// follows are trees the command reads following the symlinks inside them (grep -R, rg
	// -L, find -L): each link's real path is judged (ps.treeLinks).
	follows []string
}

// follow adds the trees a command reads following links: its path operands, or its working
// directory when it names none.
func (u *use) follow(ops []string) {
	for _, o := range ops {
		if p := u.rel(o); p != "" {
			u.follows = append(u.follows, p)
		}
	}
	if len(ops) == 0 {
		u.follows = append(u.follows, u.dir)
	}
}

// move is a name that may land in any of dirs.
type move struct {
	name string
	dirs []string
}

// path adds one word that names a path.
func (u *use) path(p string) {
	if p = u.rel(p); p != "" {
		u.paths = append(u.paths, p)
	}
}

// newIn adds a new entry the command makes in a directory (a temporary file renamed over
// another, a backup, a link named for its target): judged as a name of that directory that
// does not exist yet, so that making it is as writing any new file there — not as writing
// the directory itself, which is an ancestor of everything in it.
func (u *use) newIn(dir string) { u.path(path.Join(dir, newEntry)) }

// newEntry is the name newIn judges a new entry by.
const newEntry = ".paddock-new-entry"

// look adds one word that names a path the command only reads, even when it writes
// elsewhere: only whether it is or holds a secret counts.
func (u *use) look(p string) {
	if p = u.rel(p); p != "" {
		u.reads = append(u.reads, p)
	}
}

// rel is p relative to the step's working directory ("" for none).
func (u *use) rel(p string) string {
	if p == "" || p == "-" {
		return ""
	}
	if u.dir != "" && u.dir != "." && !strings.HasPrefix(p, "/") {
		p = u.dir + "/" + p
	}
	return p
}

// word adds every path a word may name: the word itself unless it is an option, the value
// after "=" ("--file=x", "NAME=x"), the part of an option from its first "/" ("-o/x"),
// each without a leading "@" or "<" (curl's "@file"), and the path of a file:// URL.
func (u *use) word(w string) {
	if w == "" || w == "-" {
		return
	}
	add := func(p string) {
		p = strings.TrimLeft(p, "@<")
		if rest, ok := strings.CutPrefix(p, "file://"); ok {
			p = rest
			if i := strings.IndexByte(p, '/'); i > 0 {
				p = p[i:] // file://host/path
			}
		}
		u.path(p)
	}
	if w[0] != '-' {
		add(w)
	}
	if i := strings.IndexByte(w, '='); i >= 0 {
		add(w[i+1:])
	} else if w[0] == '-' {
		if i := strings.IndexByte(w, '/'); i >= 0 {
			add(w[i:])
		}
	}
}

// assigns adds what words that are assignments (NAME=value) set for the programs run
// next: protected for a variable that moves where git finds a repository (gitEnvEffect).
func (u *use) assigns(ws []string) {
	for _, w := range ws {
		u.own |= gitEnvEffect(w)
	}
}

// words adds every path each word may name.
func (u *use) words(ws []string) {
	for _, w := range ws {
		u.word(w)
	}
}

// readsDir records that the command reads its directory because it names no path.
func (u *use) readsDir() { u.reads = append(u.reads, u.dir) }

// rule reads a command's arguments (after its name) into u.
type rule func(u *use, args []string)

// evaluate judges argv by the table; a name with "/" or not in the table is exec.
func evaluate(u *use, argv []string) {
	if opaqueShell(u, argv, true) {
		return
	}
	name := argv[0]
	r, ok := table[name]
	if strings.Contains(name, "/") || !ok {
		u.own |= Exec
		if strings.Contains(name, "/") {
			u.path(name)
		}
		u.words(argv[1:])
		u.assigns(argv[1:]) // declare -x, typeset, readonly, make…
		return
	}
	r(u, argv[1:])
}

// table gives each command's rule. Every entry states its whole rule here or in the
// function it names.
var table map[string]rule

func init() {
	table = map[string]rule{
		// Words that are no paths: text, numbers, character sets.
		"echo": none(0), "printf": none(0), "pwd": none(0), "true": none(0), "false": none(0),
		"sleep": none(0), "seq": none(0), "yes": none(0), "basename": none(0),
		"dirname": none(0), "expr": none(0), "unset": none(0), "exit": none(0),
		"tr": none(Read), // reads standard input only; its operands are character sets

		// Readers: every word may name a path that is read.
		"cat": plain(Read), "head": plain(Read), "tail": plain(Read), "wc": plain(Read),
		"diff": diffRule, "cmp": plain(Read), "cut": plain(Read), "stat": plain(Read),
		"comm": plain(Read), "join": plain(Read), "paste": plain(Read), "nl": plain(Read),
		"tac": plain(Read), "rev": plain(Read), "fold": plain(Read), "fmt": plain(Read),
		"od": plain(Read), "hexdump": plain(Read), "base64": plain(Read), "base32": plain(Read),
		"md5sum": plain(Read), "sha1sum": plain(Read), "sha224sum": plain(Read),
		"sha256sum": plain(Read), "sha384sum": plain(Read), "sha512sum": plain(Read),
		"b2sum": plain(Read), "cksum": plain(Read), "sum": plain(Read), "strings": plain(Read),
		"expand": plain(Read), "unexpand": plain(Read), "column": plain(Read),
		"realpath": plain(Read), "readlink": plain(Read), "df": plain(Read), "jq": plain(Read),
		// test and [ look at paths' metadata, like pwd: no effect of their own.
		"test": plain(0), "[": plain(0),
		// cd changes the working directory of later steps: no effect of its own.
		"cd": plain(0),

		// Writers: every word may name a path that is written (or, for cp, read).
		"mkdir": mkdirRule, "rmdir": plain(Write), "rm": plain(Write), "touch": plain(Write),
		"ln": lnRule, "mv": copier(Write), "chmod": plain(Write), "chown": plain(Write),
		"chgrp": plain(Write), "truncate": plain(Write), "tee": plain(Write),
		"cp": copier(Read | Write),

		"export": exportRule,
		"ls":     lsRule, "du": duRule, "tree": treeRule, "find": findRule,
		"grep": grepRule, "rg": rgRule, "sed": sedRule, "sort": sortRule, "uniq": uniqRule,
		"xxd": xxdRule, "less": lessRule, "file": fileRule, "git": gitRule,

		// Network clients.
		"curl": curlRule, "wget": wgetRule,
		"nc": ncRule, "ncat": ncRule, "netcat": ncRule, "socat": socatRule,
		"ssh": sshRule, "scp": scpRule, "rsync": rsyncRule,
		// sftp, ftp and telnet read commands from standard input, where "!" runs a local
		// shell: they are exec too.
		"sftp": sftpRule, "ftp": netExec, "telnet": netExec,

		// Launchers: exec, plus every effect of the command they run.
		"nohup": wrapper(&spec{inOrder: true}), "setsid": wrapper(&spec{inOrder: true}),
		"timeout": timeoutRule, "nice": wrapper(&spec{short: "n", long: []string{"adjustment"}, inOrder: true}),
		"stdbuf": wrapper(&spec{short: "ioe", long: []string{"input", "output", "error"}, inOrder: true}),
		"env":    envRule, "xargs": xargsRule, "time": timeRule,
		"command": commandRule, "exec": wrapper(&spec{short: "a", inOrder: true}),
	}
}

// none: the command's own effects, and no word is a path.
func none(own Effects) rule {
	return func(u *use, _ []string) { u.own |= own }
}

// plain: the command's own effects, and every word may name a path; after "--" every word
// is one, however it looks (tee -- --append writes a file of that name).
func plain(own Effects) rule {
	return func(u *use, args []string) {
		u.own |= own
		operandWords(u, args)
	}
}

// operandWords adds every path the words may name, and after "--" each word itself.
func operandWords(u *use, args []string) {
	for i, w := range args {
		if w == "--" {
			for _, o := range args[i+1:] {
				u.path(o)
			}
			return
		}
		u.word(w)
	}
}

// diff reads its operands and the files its options name (-X, --from-file…).
var diffSpec = &spec{
	short: "CUDFIxXSW",
	long: []string{"unified", "context", "ifdef", "show-function-line", "ignore-matching-lines", "exclude",
		"exclude-from", "starting-file", "from-file", "to-file", "label", "width", "tabsize",
		"horizon-lines", "line-format", "old-line-format", "new-line-format", "unchanged-line-format",
		"old-group-format", "new-group-format", "changed-group-format", "unchanged-group-format"},
	longOpt: []string{"color", "palette"},
}

func diffRule(u *use, args []string) {
	u.own |= Read
	a := diffSpec.parse(args)
	for _, o := range a.opts {
		if o.hasValue {
			u.path(o.value)
		}
	}
	operandWords(u, args)
}

// mkdir writes; with -p (--parents) every missing parent of an operand too.
func mkdirRule(u *use, args []string) {
	u.own |= Write
	operandWords(u, args)
	a := (&spec{short: "mZ", long: []string{"mode", "context"}, flags: []string{"parents", "verbose"}}).parse(args)
	if a.has("-p", "--parents") {
		for _, o := range a.operands {
			for d := path.Dir(o); d != "." && d != "/"; d = path.Dir(d) {
				u.newIn(path.Dir(d)) // a missing parent is a new entry in its own
			}
		}
	}
}

// copier is cp, mv and ln: every word may name a path (plain); a backup (-b, --backup,
// -S, --suffix) is a new name beside each target, so the targets' directories are written.
func copier(own Effects) rule {
	return func(u *use, args []string) {
		plain(own)(u, args)
		a := copierSpec.parse(args)
		if len(a.operands) == 1 {
			u.newIn(".") // ln TARGET, cp SOURCE…: a new name in the working directory
		}
		for _, d := range a.values("-t", "--target-directory") {
			u.path(d)
		}
		// A symlink moved or copied as a link points from where it lands.
		sources, dirs := landing(a.operands, a.values("-t", "--target-directory"))
		for _, src := range sources {
			u.moves = append(u.moves, move{u.rel(src), dirs})
		}
		if a.has("-b", "-S", "--backup", "--suffix") {
			for _, o := range a.operands {
				u.newIn(path.Dir(o))
			}
			for _, d := range a.values("-t", "--target-directory") {
				u.newIn(d)
			}
		}
	}
}

// lnRule is ln: a copier whose symbolic links are also judged where they will point. A
// link's target is read from the link's own directory, not the working directory: ln -s
// ../../.ssh/id_rsa sub/dir/k points at .ssh/id_rsa, so each target is judged from every
// directory the link may be made in (beside the last operand, or in it when it is a
// directory; in each -t directory; in the working directory for one operand).
func lnRule(u *use, args []string) {
	copier(Write)(u, args)
	a := lnSpec.parse(args)
	if a.has("-f", "--force") {
		// GNU ln makes the link under a temporary name beside its destination, then renames
		// it over the old one.
		for _, o := range a.operands {
			u.newIn(path.Dir(o))
		}
		for _, d := range a.values("-t", "--target-directory") {
			u.newIn(d)
		}
	}
	if !a.has("-s", "--symbolic") || len(a.operands) == 0 {
		return
	}
	targets, dirs := landing(a.operands, a.values("-t", "--target-directory"))
	for _, t := range targets {
		if strings.HasPrefix(t, "/") {
			continue // judged as it is
		}
		for _, d := range dirs {
			u.path(d + "/" + t) // not cleaned: ".." steps up from the real directory
		}
	}
}

// landing returns the sources of cp, mv or ln and the directories they may land in:
// each -t directory; else beside the last operand, or in it when it is a directory.
func landing(operands, targetDirs []string) (sources, dirs []string) {
	switch {
	case len(targetDirs) > 0:
		return operands, targetDirs
	case len(operands) < 2:
		return operands, []string{"."}
	}
	last := operands[len(operands)-1]
	return operands[:len(operands)-1], []string{path.Dir(last), last}
}

var lnSpec = &spec{
	short:   "St",
	long:    []string{"suffix", "target-directory"},
	longOpt: []string{"backup"},
	flags: []string{"directory", "force", "interactive", "logical", "no-dereference",
		"no-target-directory", "physical", "relative", "symbolic", "verbose"},
}

var copierSpec = &spec{
	short:   "StZ",
	long:    []string{"suffix", "target-directory", "no-preserve", "sparse"},
	longOpt: []string{"backup", "preserve", "reflink", "context", "update"},
}

// export with an operand sets the environment of later programs: exec (and protected for
// a variable that moves where git finds a repository).
func exportRule(u *use, args []string) {
	if len(args) > 0 {
		u.own |= Exec
	}
	u.words(args)
	u.assigns(args)
}

// ls reads; with no operand it reads its working directory. Option values are patterns
// and numbers, no paths.
var lsSpec = &spec{
	short:   "ITw",
	long:    []string{"ignore", "hide", "width", "tabsize", "format", "sort", "time", "time-style", "quoting-style", "indicator-style", "block-size"},
	longOpt: []string{"color", "hyperlink", "classify", "indicator-style"},
}

func lsRule(u *use, args []string) {
	u.own |= Read
	a := lsSpec.parse(args)
	operands(u, a.operands, true)
}

// operands adds each operand as a path; with none, when readsCwd, the directory is read.
func operands(u *use, ops []string, readsCwd bool) {
	for _, o := range ops {
		u.path(o)
	}
	if len(ops) == 0 && readsCwd {
		u.readsDir()
	}
}

// du reads; with no operand (and no --files0-from) it reads its working directory.
var duSpec = &spec{
	short:   "BdtX",
	long:    []string{"block-size", "max-depth", "threshold", "exclude", "exclude-from", "files0-from", "time-style"},
	longOpt: []string{"time"},
}

func duRule(u *use, args []string) {
	u.own |= Read
	a := duSpec.parse(args)
	from := a.values("-X", "--exclude-from", "--files0-from")
	for _, f := range from {
		u.path(f)
	}
	operands(u, a.operands, !a.has("--files0-from"))
}

// tree reads; with no operand it reads its working directory. -o FILE writes the listing,
// -R writes 00Tree.html files (with -H).
var treeSpec = &spec{
	short:   "LPIoHT",
	long:    []string{"charset", "filelimit", "timefmt", "sort", "fromfile", "gitfile", "hintro", "houtro", "infofile"},
	longOpt: []string{"info"},
}

func treeRule(u *use, args []string) {
	u.own |= Read
	a := treeSpec.parse(args)
	if a.has("-o", "-R") {
		u.own |= Write
	}
	for _, f := range a.values("-o", "--gitfile", "--hintro", "--houtro", "--infofile") {
		u.path(f)
	}
	operands(u, a.operands, !a.has("--fromfile"))
}

// find reads its start points (its working directory when it names none). -exec, -execdir,
// -ok and -okdir run programs: exec. -delete, -fls, -fprint, -fprint0 and -fprintf write.
// Every word of the expression may name a path (-newer FILE, a program's operands).
func findRule(u *use, args []string) {
	u.own |= Read
	i := 0
	for i < len(args) { // leading options: -H -L -P -D debugopts -Olevel
		switch a := args[i]; {
		case a == "-H" || a == "-L" || a == "-P":
			i++
		case a == "-D":
			i += 2
		case strings.HasPrefix(a, "-O") || (strings.HasPrefix(a, "-D") && len(a) > 2):
			i++
		default:
			goto starts
		}
	}
starts:
	start := i
	for i < len(args) && !isFindExpr(args[i]) {
		i++
	}
	operands(u, args[start:min(i, len(args))], !contains(args[i:], "-files0-from"))
	if contains(args[:start], "-L") || contains(args[i:], "-follow") {
		u.follow(args[start:min(i, len(args))])
	}
	expr := args[min(i, len(args)):]
	for j, w := range expr {
		if j > 0 && findTakesFile(expr[j-1]) {
			// A file whatever it looks like: "-fprint --" writes a file named --, and
			// "-fls -" one named -, not the standard output.
			if w == "-" {
				w = "./-"
			}
			u.path(w)
		}
		switch w {
		case "-exec", "-execdir", "-ok", "-okdir":
			u.own |= Exec
			if j+1 < len(expr) && isShell(expr[j+1]) {
				end := j + 1
				for end < len(expr) && expr[end] != ";" && expr[end] != "+" {
					end++
				}
				opaqueShell(u, expr[j+1:end], w == "-exec" || w == "-ok")
			}
		case "-delete", "-fls", "-fprint", "-fprint0", "-fprintf":
			u.own |= Write
		}
		u.word(w)
	}
}

// findTakesFile reports whether find's primary w takes a file as its next word: what is
// written (-fls, -fprint, -fprint0, -fprintf), compared with (-newer and its kin, -samefile)
// or read for the start points (-files0-from). -newerXY takes a time, not a file, when Y is t.
func findTakesFile(w string) bool {
	switch w {
	case "-fls", "-fprint", "-fprint0", "-fprintf", "-newer", "-anewer", "-cnewer", "-samefile", "-files0-from":
		return true
	}
	return len(w) == len("-newerXY") && strings.HasPrefix(w, "-newer") && w[7] != 't'
}

// isFindExpr reports whether a word starts find's expression.
func isFindExpr(w string) bool {
	return (strings.HasPrefix(w, "-") && w != "-") || w == "(" || w == "!" || w == ")" || w == ","
}

func contains(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// grep reads. The first operand is the pattern unless -e or -f gives one; the rest are
// paths. Recursive (-r, -R, -d recurse) with no path operand, it reads its working directory.
var grepSpec = &spec{
	short:   "efmABCdDX",
	long:    []string{"regexp", "file", "max-count", "after-context", "before-context", "context", "label", "include", "exclude", "exclude-from", "exclude-dir", "binary-files", "devices", "directories", "group-separator"},
	longOpt: []string{"color", "colour"},
	flags:   []string{"recursive", "dereference-recursive"},
}

func grepRule(u *use, args []string) {
	u.own |= Read
	a := grepSpec.parse(args)
	for _, f := range a.values("-f", "--file", "--exclude-from") {
		u.path(f)
	}
	ops := a.operands
	if !a.has("-e", "-f", "--regexp", "--file") && len(ops) > 0 {
		ops = ops[1:]
	}
	recursive := a.has("-r", "-R", "--recursive", "--dereference-recursive")
	for _, d := range a.values("-d", "--directories") {
		if strings.HasPrefix("recurse", d) && d != "" {
			recursive = true
		}
	}
	operands(u, ops, recursive)
	if a.has("-R", "--dereference-recursive") {
		u.follow(ops)
	}
}

// rg reads. The first operand is the pattern unless -e, -f, --regexp, --file or --files is
// given; the rest are paths; with none it reads its working directory. --pre, --pre-glob,
// --hostname-bin and -z/--search-zip run programs: exec; so does a config file named by
// RIPGREP_CONFIG_PATH, which may hold them.
var rgSpec = &spec{
	short: "efgtTmABCMjdErV",
	long: []string{"regexp", "file", "glob", "iglob", "type", "type-not", "type-add", "type-clear",
		"max-count", "after-context", "before-context", "context", "max-columns", "threads",
		"max-depth", "maxdepth", "max-filesize", "encoding", "color", "colors", "path-separator",
		"sort", "sortr", "replace", "ignore-file", "pre", "pre-glob", "hostname-bin", "engine",
		"context-separator", "field-context-separator", "field-match-separator",
		"dfa-size-limit", "regex-size-limit", "hyperlink-format", "generate"},
	flags: []string{"files", "search-zip", "files-with-matches", "files-without-match"},
}

func rgRule(u *use, args []string) {
	u.own |= Read
	a := rgSpec.parse(args)
	if a.has("--pre", "--pre-glob", "--hostname-bin", "-z", "--search-zip") || u.ctx.Getenv("RIPGREP_CONFIG_PATH") != "" {
		u.own |= Exec
	}
	for _, f := range a.values("-f", "--file", "--ignore-file", "--pre") {
		u.path(f)
	}
	ops := a.operands
	if !a.has("-e", "-f", "--regexp", "--file", "--files") && len(ops) > 0 {
		ops = ops[1:]
	}
	operands(u, ops, true)
	if a.has("-L", "--follow") {
		u.follow(ops)
	}
}

// sed reads; each script must be a known-safe form (sed.go), else exec; -i writes the
// files it edits.
func sedRule(u *use, args []string) {
	u.own |= Read
	scripts, files, inPlace, ok := sedArgs(args)
	if !ok {
		// A form the table cannot judge (a script file, an unknown option): exec, and
		// every option's value and operand may be a file it reads or writes.
		u.own |= Exec | Write
		a := sedSpec.parse(args)
		for _, o := range a.opts {
			if o.hasValue {
				u.path(o.value)
			}
		}
		// A script given with it (-e) is judged as one of other forms: its words may be
		// the files it reads and writes.
		for _, s := range a.values("-e", "--expression") {
			sedScriptFiles(u, s)
		}
		operandWords(u, args)
		for _, o := range a.operands {
			u.newIn(path.Dir(o)) // -i writes a new file beside each it edits
		}
		return
	}
	for _, s := range scripts {
		if !SedSafe(s) {
			// A script of other forms may read and write files it names (r, w, s///w) and
			// run programs (e): exec and write, and its words may be those files.
			u.own |= Exec | Write
			sedScriptFiles(u, s)
		}
	}
	if inPlace {
		u.own |= Write
	}
	for _, f := range files {
		u.path(f)
		if inPlace {
			u.newIn(path.Dir(f)) // the edit is a new file beside it, renamed over it
		}
	}
}

// sedScriptFiles names what a sed script of other forms than the known-safe ones may read
// and write: each of its words, and a new file in the directory (w makes one).
func sedScriptFiles(u *use, script string) {
	u.newIn(".")
	for _, f := range strings.Fields(script) {
		u.path(f)
	}
}

// sort reads. --compress-program runs a program: exec. -o/--output writes its file and
// -T/--temporary-directory writes in its directory.
var sortSpec = &spec{
	short: "ktoTS",
	long:  []string{"key", "field-separator", "output", "temporary-directory", "buffer-size", "parallel", "batch-size", "files0-from", "compress-program", "sort", "random-source"},
	flags: []string{"check"},
}

func sortRule(u *use, args []string) {
	u.own |= Read
	a := sortSpec.parse(args)
	if a.has("--compress-program") {
		u.own |= Exec
	}
	if a.has("-o", "--output", "-T", "--temporary-directory") {
		u.own |= Write
	}
	for _, f := range a.values("-o", "--output", "-T", "--temporary-directory", "--files0-from", "--random-source", "--compress-program") {
		u.path(f)
	}
	for _, f := range a.values("-o", "--output") {
		if f == "-" {
			u.paths = append(u.paths, u.dir+"/-") // sort -o - writes a file named "-"
		}
	}
	operands(u, a.operands, false)
}

// uniq reads; a second operand is the file it writes.
var uniqSpec = &spec{
	short:   "fsw",
	long:    []string{"skip-fields", "skip-chars", "check-chars"},
	longOpt: []string{"all-repeated", "group"},
}

func uniqRule(u *use, args []string) {
	u.own |= Read
	a := uniqSpec.parse(args)
	if len(a.operands) >= 2 {
		u.own |= Write
	}
	operands(u, a.operands, false)
}

// xxd reads; a second operand (other than "-") is the file it writes. Its options are read
// as xxd.c reads them: in order, up to the first operand or "--"; "--x" is "-x"; each is
// known by its first two characters, so "-cfoo" is -c with the value "foo" and "-cols" is
// -c spelt long, whose value is the next word (the names -c cols, -g roup, -l en, -o ffset,
// -s eek/kip, -n ame, -R; -c apitalize takes none); an unknown option ends xxd.
func xxdRule(u *use, args []string) {
	u.own |= Read
	long := map[byte][]string{'c': {"ols"}, 'g': {"roup"}, 'l': {"en"}, 'o': {"ffset"},
		's': {"eek", "kip"}, 'n': {"ame"}, 'R': {""}}
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if strings.HasPrefix(w, "--") && len(w) > 2 {
			w = w[1:]
		}
		if w == "-" || !strings.HasPrefix(w, "-") {
			break
		}
		if w == "--" {
			i++
			break
		}
		names, takes := long[w[1]]
		if !takes {
			continue // a flag (an unknown one makes xxd print its usage: it reads nothing)
		}
		attached := len(w) > 2
		for _, n := range names {
			if n != "" && strings.HasPrefix(w[2:], n) {
				attached = false
			}
		}
		if !attached {
			i++ // the value is the next word
		}
	}
	ops := args[min(i, len(args)):]
	if len(ops) >= 2 && ops[1] != "-" {
		u.own |= Write
	}
	operands(u, ops, false)
}

// less reads. A "+" command holding "!" or "|" runs a shell: exec; "v" (outside a search)
// starts an editor: exec. -o/-O/--log-file/--LOG-FILE write a log. A lesskey file, or a
// LESSOPEN in the environment, can run programs: exec.
var lessSpec = &spec{
	short: "bhjkoOpPtTxyz#",
	long: []string{"log-file", "LOG-FILE", "lesskey-file", "lesskey-src", "lesskey-content", "tag",
		"tag-file", "pattern", "prompt", "shift", "tabs", "window", "max-back-scroll",
		"max-forw-scroll", "buffers", "jump-target", "header", "rscroll", "color", "line-num-width",
		"status-col-width", "wheel-lines", "intr", "file-size"},
}

func lessRule(u *use, args []string) {
	u.own |= Read
	var rest []string
	for _, w := range args {
		if cmd, ok := strings.CutPrefix(w, "+"); ok {
			cmd = strings.TrimPrefix(cmd, "+")
			search := strings.HasPrefix(cmd, "/") || strings.HasPrefix(cmd, "?")
			if strings.ContainsAny(cmd, "!|") || (!search && strings.Contains(cmd, "v")) {
				u.own |= Exec
			}
			continue
		}
		rest = append(rest, w)
	}
	a := lessSpec.parse(rest)
	if a.has("-o", "-O", "--log-file", "--LOG-FILE") {
		u.own |= Write
	}
	if a.has("-k", "--lesskey-file", "--lesskey-src", "--lesskey-content") || u.ctx.Getenv("LESSOPEN") != "" {
		u.own |= Exec
	}
	for _, f := range a.values("-o", "-O", "--log-file", "--LOG-FILE", "-k", "--lesskey-file", "--lesskey-src", "-T", "--tag-file") {
		u.path(f)
	}
	operands(u, a.operands, false)
}

// file reads. -C/--compile writes a compiled magic file; -z/-Z/--uncompress run
// decompressors: exec.
var fileSpec = &spec{
	short: "mfFPe",
	long:  []string{"magic-file", "files-from", "separator", "parameter", "exclude", "exclude-quiet"},
	flags: []string{"compile", "uncompress", "uncompress-noreport", "preserve-date"},
}

func fileRule(u *use, args []string) {
	u.own |= Read
	a := fileSpec.parse(args)
	if a.has("-C", "--compile") {
		u.own |= Write
		u.newIn(".") // FILE.mgc, in the working directory
	}
	if a.has("-p", "--preserve-date") {
		u.own |= Write // it sets each file's access time back
	}
	if a.has("-z", "-Z", "--uncompress", "--uncompress-noreport") {
		u.own |= Exec
	}
	for _, f := range a.values("-m", "--magic-file", "-f", "--files-from") {
		u.path(f)
	}
	operands(u, a.operands, false)
}

// curl talks to the network; an option that writes a file (-o -O -D -c -K --output …) adds
// write. Every word may name a path ("-d @file", "-T file", "file://…").
var curlSpec = &spec{
	short: "AbcCdDeEFHKmoPQrtTuUwxXyYz",
	long: []string{"output", "dump-header", "cookie-jar", "config", "output-dir", "trace",
		"trace-ascii", "stderr", "libcurl", "etag-save", "hsts", "alt-svc", "data", "data-binary",
		"data-raw", "data-urlencode", "header", "user", "request", "form", "upload-file", "url",
		"user-agent", "referer", "cookie", "proxy", "cert", "key", "cacert", "write-out"},
	flags: []string{"remote-name", "remote-name-all", "remote-header-name", "create-dirs"},
}

func curlRule(u *use, args []string) {
	u.own |= Net
	a := curlSpec.parse(args)
	if a.has("-o", "-O", "-D", "-c", "-K", "-J", "--output", "--remote-name", "--remote-name-all",
		"--dump-header", "--cookie-jar", "--config", "--output-dir", "--trace", "--trace-ascii",
		"--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc", "--remote-header-name",
		"--create-dirs") {
		u.own |= Write
	}
	u.words(args)
	// Every option's value may name a file, as written (-T FILE uploads it, -Tf2 too); a
	// file curl writes is written through a new one beside it (-c JAR): its directory too.
	for _, o := range a.opts {
		if o.hasValue {
			u.path(o.value)
			u.word(o.value) // "@file" reads file
		}
	}
	for _, f := range a.values("-o", "-D", "-c", "--output", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc") {
		u.newIn(path.Dir(f))
	}
	if a.dashdash >= 0 {
		for _, o := range a.operands[a.dashdash:] {
			u.path(o)
		}
	}
}

// wget talks to the network and writes what it fetches. --use-askpass, -e/--execute and
// --config can run programs: exec.
var wgetSpec = &spec{
	short: "OoaiPetTwUlARDIXQB",
	long:  []string{"execute", "config", "use-askpass", "output-document", "output-file", "append-output", "input-file", "directory-prefix", "post-file", "body-file", "post-data"},
}

func wgetRule(u *use, args []string) {
	u.own |= Net | Write
	a := wgetSpec.parse(args)
	if a.has("-e", "--execute", "--config", "--use-askpass") {
		u.own |= Exec
	}
	u.words(args)
}

// nc, ncat and netcat talk to the network; -e, -c, --exec, --sh-exec and --lua-exec run a
// program: exec; ncat's -o/--output and --append-output write.
var ncSpec = &spec{
	short: "ecpswiqxXoOIdTV",
	long:  []string{"exec", "sh-exec", "lua-exec", "output", "hex-dump", "append-output"},
}

func ncRule(u *use, args []string) {
	u.own |= Net
	a := ncSpec.parse(args)
	if a.has("-e", "-c", "--exec", "--sh-exec", "--lua-exec") {
		u.own |= Exec
	}
	if a.has("-o", "--output", "--hex-dump", "--append-output") {
		u.own |= Write
	}
	u.words(args)
}

// socat talks to the network; an EXEC or SYSTEM address runs a program: exec; a file
// address (OPEN, CREATE, GOPEN, PIPE) writes, and its file is a path.
func socatRule(u *use, args []string) {
	u.own |= Net
	for _, w := range args {
		kind, rest, ok := strings.Cut(w, ":")
		if !ok {
			u.word(w)
			continue
		}
		switch strings.ToUpper(kind) {
		case "EXEC", "SYSTEM":
			u.own |= Exec
		case "OPEN", "CREATE", "GOPEN", "PIPE", "NAMEDPIPE", "FILE":
			u.own |= Write
			p, _, _ := strings.Cut(rest, ",")
			u.path(p)
		}
		u.word(w)
	}
}

// sshProgram reports whether an ssh -o option runs a local program.
func sshProgram(o string) bool {
	key, _, _ := strings.Cut(strings.TrimSpace(o), "=")
	key, _, _ = strings.Cut(key, " ")
	switch strings.ToLower(key) {
	case "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "include", "match":
		return true
	}
	return false
}

var sshSpec = &spec{short: "bcDEeFIiJLlmOopQRSWwB"}

// ssh talks to the network. -o ProxyCommand/LocalCommand/KnownHostsCommand/Include and -F
// (a config file that may hold them) run programs: exec. -E writes a log.
func sshRule(u *use, args []string) {
	u.own |= Net
	a := sshSpec.parse(args)
	sshExec(u, &a)
	if a.has("-E") {
		u.own |= Write
	}
	u.words(args)
}

func sshExec(u *use, a *args) {
	if a.has("-F") {
		u.own |= Exec
	}
	for _, o := range a.values("-o") {
		if sshProgram(o) {
			u.own |= Exec
		}
	}
}

// scp talks to the network and writes the files it copies here. -S names the program it
// runs: exec; -o and -F as for ssh.
var scpSpec = &spec{short: "cFiJloPSDX"}

func scpRule(u *use, args []string) {
	u.own |= Net | Read | Write
	a := scpSpec.parse(args)
	sshExec(u, &a)
	if a.has("-S", "-D") {
		u.own |= Exec
	}
	u.words(args)
}

// sftp talks to the network, writes what it gets and reads its commands from standard
// input or -b, where "!" runs a local shell: exec.
func sftpRule(u *use, args []string) {
	u.own |= Net | Read | Write | Exec
	u.words(args)
}

// netExec: a network client that reads commands where "!" runs a shell.
func netExec(u *use, args []string) {
	u.own |= Net | Exec
	u.words(args)
}

// rsync copies files, over the network or not: read and write. -e/--rsh runs a program:
// exec.
var rsyncSpec = &spec{
	short: "eBfTM",
	long:  []string{"rsh", "rsync-path", "filter", "exclude", "exclude-from", "include", "include-from", "files-from", "log-file", "temp-dir", "partial-dir", "backup-dir", "compare-dest", "copy-dest", "link-dest", "password-file", "write-batch", "read-batch", "only-write-batch", "chmod", "chown", "usermap", "groupmap", "timeout", "contimeout", "port", "sockopts", "bwlimit", "max-size", "min-size", "suffix"},
}

func rsyncRule(u *use, args []string) {
	u.own |= Net | Read | Write
	a := rsyncSpec.parse(args)
	if a.has("-e", "--rsh") {
		u.own |= Exec
	}
	u.words(args)
}

// wrapper: a launcher is exec, and has every effect of the command it runs.
func wrapper(s *spec) rule {
	return func(u *use, args []string) {
		u.own |= Exec
		a := s.parse(args)
		for _, o := range a.opts {
			if o.hasValue {
				u.word(o.value)
			}
		}
		if len(a.operands) > 0 {
			evaluate(u, a.operands)
		}
	}
}

// timeout DURATION COMMAND…
func timeoutRule(u *use, args []string) {
	u.own |= Exec
	a := (&spec{short: "sk", long: []string{"signal", "kill-after"}, inOrder: true}).parse(args)
	if len(a.operands) > 1 {
		evaluate(u, a.operands[1:])
	}
}

// env [NAME=VALUE…] COMMAND…: exec (it sets the environment of what it runs), plus the
// command's effects. -S splits a string into a command line: its words may name paths.
func envRule(u *use, args []string) {
	u.own |= Exec
	a := (&spec{short: "uCS", long: []string{"unset", "chdir", "split-string"}, inOrder: true}).parse(args)
	for _, v := range a.values("-S", "--split-string", "-C", "--chdir") {
		u.words(strings.Fields(v))
	}
	ops := a.operands
	for len(ops) > 0 && strings.Contains(ops[0], "=") {
		u.word(ops[0])
		u.own |= gitEnvEffect(ops[0])
		ops = ops[1:]
	}
	if len(ops) > 0 {
		evaluate(u, ops)
	}
}

// xargs runs a command (echo by default) with words read from its input: exec, plus the
// command's effects; a command that writes may then write anywhere: outside and protected.
func xargsRule(u *use, args []string) {
	u.own |= Exec
	a := (&spec{
		short: "adEIsLnP", shortOpt: "eil",
		long:    []string{"arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"},
		longOpt: []string{"eof", "replace", "max-lines"},
		inOrder: true,
	}).parse(args)
	for _, f := range a.values("-a", "--arg-file") {
		u.path(f)
	}
	if len(a.operands) == 0 {
		return
	}
	inner := use{ctx: u.ctx, dir: u.dir}
	evaluate(&inner, a.operands)
	if inner.own.Has(Write) {
		inner.own |= Outside | Protected
	}
	u.own |= inner.own
	u.paths = append(u.paths, inner.paths...)
	u.reads = append(u.reads, inner.reads...)
}

// time [-p] COMMAND…; GNU time's -o/--output writes its report.
func timeRule(u *use, args []string) {
	u.own |= Exec
	a := (&spec{short: "of", long: []string{"output", "format"}, inOrder: true}).parse(args)
	if a.has("-o", "--output") {
		u.own |= Write
		for _, f := range a.values("-o", "--output") {
			u.path(f)
		}
	}
	if len(a.operands) > 0 {
		evaluate(u, a.operands)
	}
}

// command COMMAND… runs it; command -v/-V only describes it.
func commandRule(u *use, args []string) {
	u.own |= Exec
	a := (&spec{inOrder: true}).parse(args)
	if a.has("-v", "-V") || len(a.operands) == 0 {
		return
	}
	evaluate(u, a.operands)
}

// cleanRel joins a relative path onto dir lexically.
func cleanRel(dir, p string) string {
	if strings.HasPrefix(p, "/") || dir == "." || dir == "" {
		return p
	}
	return path.Join(dir, p)
}
