package policy

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/peer"
)

// The rules against the programs themselves: for random command lines — options of every
// form the program takes (clusters, attached and separate values, values that look like
// options or numbers, long names and their abbreviations, "--", options after operands) —
// each real program is run under strace in a directory of files, and what it opened, made,
// renamed, removed or executed there is compared with what its rule says. The law is the
// rule's soundness: every file the program read or wrote is one the rule names (or lies
// under a directory it names), a program that wrote anything has write, one that ran
// another program exec. Where the rule says more than the program did, it erred toward the
// effect, as it should when unsure.

// diffCommand is one program and the words its command lines are drawn from.
type diffCommand struct {
	name  string
	flags string   // short options that take no value
	takes string   // short options that take a value
	long  []string // long options, "name=" for one that takes a value
	// values are the values drawn for an option; files are always among them.
	values []string
	setup  func(dir string) // more fixtures (a repository)
}

var numbers = []string{"0", "1", "+0", "-1", "+5", "-c", "3", "8", "-", "x", "k2,2", "1K"}

var diffCommands = []diffCommand{
	{name: "cat", flags: "AbeEnstTuv"},
	{name: "head", flags: "qvz", takes: "cn", long: []string{"bytes=", "lines=", "quiet", "verbose"}, values: numbers},
	{name: "tail", flags: "qvzr", takes: "cn", long: []string{"bytes=", "lines=", "quiet"}, values: numbers},
	{name: "wc", flags: "clmwL", long: []string{"files0-from=", "bytes", "lines"}},
	{name: "cut", flags: "sz", takes: "bcdf", long: []string{"bytes=", "fields=", "delimiter=", "output-delimiter=", "complement"}, values: []string{"1", "1-2", ",", ":"}},
	{name: "sort", flags: "bdfgiMhnRrsuVcCmz", takes: "koStT", long: []string{"output=", "key=", "temporary-directory=", "files0-from=", "random-source=", "batch-size=", "parallel=", "buffer-size=", "field-separator=", "check", "merge", "unique", "reverse", "debug"}, values: numbers},
	{name: "uniq", flags: "cdDiuz", takes: "fsw", long: []string{"skip-fields=", "skip-chars=", "check-chars=", "count", "repeated", "unique", "group"}, values: numbers},
	{name: "tee", flags: "aip", long: []string{"append", "ignore-interrupts", "output-error"}},
	{name: "xxd", flags: "abCEeipruvd", takes: "cglosnR", long: []string{"cols=", "len=", "seek=", "groupsize=", "offset=", "capitalize", "ps", "include", "revert"}, values: numbers},
	{name: "cp", flags: "afilnprsuvxHLPRTb", takes: "tS", long: []string{"target-directory=", "suffix=", "backup=", "no-target-directory", "recursive", "parents", "force"}, values: []string{"~", ".bak"}},
	{name: "mv", flags: "fintuvTb", takes: "tS", long: []string{"target-directory=", "suffix=", "backup=", "no-target-directory", "force", "no-clobber"}, values: []string{"~", ".bak"}},
	{name: "ln", flags: "bfinrsvLPT", takes: "tS", long: []string{"target-directory=", "suffix=", "symbolic", "relative", "force", "no-dereference"}, values: []string{"~"}},
	{name: "touch", flags: "acmfh", takes: "drt", long: []string{"reference=", "date=", "no-create", "time="}, values: []string{"now", "202001010000", "atime"}},
	{name: "mkdir", flags: "pv", takes: "m", long: []string{"mode=", "parents"}, values: []string{"755", "u+w"}},
	{name: "rm", flags: "dfirRv", long: []string{"recursive", "force", "dir"}},
	{name: "rmdir", flags: "pv", long: []string{"parents", "ignore-fail-on-non-empty"}},
	{name: "chmod", flags: "cfvR", long: []string{"reference=", "recursive"}, values: []string{"644", "u+x", "-w", "+x", "a-r"}},
	{name: "truncate", flags: "cor", takes: "s", long: []string{"size=", "reference=", "no-create"}, values: []string{"0", "+1", "-1", "1K"}},
	{name: "sed", flags: "nrsuEz", takes: "ef", long: []string{"expression=", "file=", "in-place", "quiet", "null-data", "separate"}, values: []string{"p", "s/a/b/", "w out", "1d"}},
	{name: "grep", flags: "cHhiLlnoqrRsvwxz", takes: "efmABCdD", long: []string{"regexp=", "file=", "max-count=", "context=", "directories=", "exclude-from=", "include=", "recursive", "files-with-matches", "count"}, values: []string{"a", "recurse", "read", "skip", "1", "x"}},
	{name: "ls", flags: "1aAdFhilLrRsStU", takes: "ITw", long: []string{"ignore=", "hide=", "width=", "sort=", "format=", "all", "recursive", "directory"}, values: []string{"*", "80", "size", "long"}},
	{name: "du", flags: "abcDhHkLmsSxl0", takes: "BdtX", long: []string{"max-depth=", "exclude-from=", "files0-from=", "threshold=", "block-size=", "summarize", "all"}, values: []string{"1", "0", "1K"}},
	{name: "od", flags: "bcdfiloxv", takes: "AjNtSw", long: []string{"address-radix=", "skip-bytes=", "read-bytes=", "format=", "width="}, values: []string{"x", "d", "1", "0", "x1"}},
	{name: "base64", flags: "diw", takes: "w", long: []string{"decode", "wrap=", "ignore-garbage"}, values: []string{"0", "76"}},
	{name: "comm", flags: "123z", long: []string{"check-order", "output-delimiter=", "total"}, values: []string{","}},
	{name: "paste", flags: "sz", takes: "d", long: []string{"delimiters=", "serial"}, values: []string{",", ":"}},
	{name: "join", flags: "iz", takes: "aejotv12", long: []string{"ignore-case", "header", "check-order"}, values: []string{"1", "2", "0", ","}},
	{name: "nl", flags: "p", takes: "bdfhilnsvw", long: []string{"body-numbering=", "number-width=", "starting-line-number="}, values: []string{"a", "1", "ln"}},
	{name: "tac", flags: "br", takes: "s", long: []string{"separator=", "before", "regex"}, values: []string{",", "a"}},
	{name: "diff", flags: "abBdiNqrstuwy", takes: "CUDFIxX", long: []string{"unified=", "exclude-from=", "from-file=", "to-file=", "recursive", "brief", "new-file"}, values: []string{"3", "0", "*.txt"}},
	{name: "cmp", flags: "blsv", takes: "inI", long: []string{"ignore-initial=", "bytes=", "print-bytes", "silent"}, values: []string{"1", "0", "2:1"}},
	{name: "md5sum", flags: "bctwz", long: []string{"check", "binary", "tag", "quiet", "status"}},
	{name: "sha256sum", flags: "bctwz", long: []string{"check", "binary", "tag", "quiet", "status"}},
	{name: "stat", flags: "LftZ", takes: "c", long: []string{"format=", "printf=", "dereference", "terse"}, values: []string{"%n", "%s"}},
	{name: "readlink", flags: "efmnqsvz", long: []string{"canonicalize", "no-newline"}},
	{name: "realpath", flags: "eLmPqsz", long: []string{"relative-to=", "relative-base=", "canonicalize-existing", "no-symlinks"}},
	{name: "strings", flags: "afw", takes: "ntTe", long: []string{"bytes=", "radix=", "encoding=", "all"}, values: []string{"4", "x", "s"}},
	{name: "file", flags: "bcEhiklLNnprsvz0", takes: "efFmP", long: []string{"files-from=", "magic-file=", "separator=", "mime", "brief", "compile"}, values: []string{":", "name=10", "ascii"}},
	{name: "find", flags: "", values: []string{"-name", "a*", "-type", "f", "-newer", "-delete", "-print", "-fprint", "-maxdepth", "1", "-L", "-H", "-files0-from", "-fls", "-fprint0", "-samefile", "-anewer", "-newermm", "--", "-"}},
	{name: "jq", flags: "nrjacSCMe", takes: "f", long: []string{"from-file=", "slurp", "raw-output", "arg", "argjson", "rawfile", "slurpfile", "args", "jsonargs"}, values: []string{".", "x", "{}"}},
	{name: "curl", flags: "sSfLIOJkv", takes: "oDcKbTdu", long: []string{"output=", "dump-header=", "cookie-jar=", "config=", "upload-file=", "data=", "output-dir=", "remote-name", "create-dirs", "stderr=", "trace=", "libcurl="}, values: []string{"file://FILE", "@f0", "@-", "x=1"}},
}

// diffFiles are the fixture's files; diffNew are names that do not exist yet.
var (
	diffFiles = []string{"f0", "f1", "f2", "dir", "dir/inner", "link"}
	diffNew   = []string{"n0", "n1", "newdir/n2"}
)

func TestRulesAgainstThePrograms(t *testing.T) {
	t.Parallel()
	strace := peer.Program(t, "strace", "strace")
	runs := 25
	if n, err := strconv.Atoi(os.Getenv("PADDOCK_DIFF_RUNS")); err == nil && n > 0 {
		runs = n
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := r.Uint64()
	t.Logf("seed %d (PADDOCK_DIFF_SEED to repeat)", seed)
	if s, err := strconv.ParseUint(os.Getenv("PADDOCK_DIFF_SEED"), 10, 64); err == nil {
		seed = s
	}
	r = rand.New(rand.NewPCG(seed, 11))
	for _, dc := range diffCommands {
		if _, err := exec.LookPath(dc.name); err != nil {
			peer.Missing(t, "no %s on PATH", dc.name)
			continue
		}
		t.Run(dc.name, func(t *testing.T) {
			fails := 0
			for i := 0; i < runs && fails < 3; i++ {
				argv := dc.draw(r)
				if msg := differ(t, strace, dc, argv); msg != "" {
					t.Errorf("%s\n  %s", Quote(argv), msg)
					fails++
				}
			}
		})
	}
}

// draw draws a command line.
func (dc diffCommand) draw(r *rand.Rand) []string {
	files := append(slices.Clone(diffFiles), diffNew...)
	value := func() string {
		if len(dc.values) > 0 && r.IntN(2) == 0 {
			v := dc.values[r.IntN(len(dc.values))]
			return strings.ReplaceAll(v, "FILE", "f1")
		}
		return files[r.IntN(len(files))]
	}
	argv := []string{dc.name}
	for n := r.IntN(6); n > 0; n-- {
		switch k := r.IntN(10); {
		case k < 4:
			argv = append(argv, files[r.IntN(len(files))])
		case k == 4 && dc.flags != "":
			w := "-"
			for m := 1 + r.IntN(3); m > 0; m-- {
				w += string(dc.flags[r.IntN(len(dc.flags))])
			}
			argv = append(argv, w)
		case k == 5 && dc.takes != "":
			c := string(dc.takes[r.IntN(len(dc.takes))])
			if r.IntN(2) == 0 {
				argv = append(argv, "-"+c+value())
			} else {
				argv = append(argv, "-"+c, value())
			}
		case k == 6 && len(dc.long) > 0:
			l := dc.long[r.IntN(len(dc.long))]
			name, takes := strings.CutSuffix(l, "=")
			if r.IntN(3) == 0 && len(name) > 3 {
				name = name[:3+r.IntN(len(name)-3)] // an abbreviation
			}
			switch {
			case takes && r.IntN(2) == 0:
				argv = append(argv, "--"+name+"="+value())
			case takes:
				argv = append(argv, "--"+name, value())
			default:
				argv = append(argv, "--"+name)
			}
		case k == 7:
			argv = append(argv, "--")
		case k == 8 && len(dc.values) > 0:
			argv = append(argv, value())
		default:
			argv = append(argv, files[r.IntN(len(files))])
		}
	}
	return argv
}

// fixture makes the directory a command line runs in.
func fixture(dir string) {
	for _, f := range []string{"f0", "f1", "f2"} {
		os.WriteFile(filepath.Join(dir, f), []byte("a 1\nb 2\nb 2\n{}\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(dir, "dir"), 0o755)
	os.WriteFile(filepath.Join(dir, "dir", "inner"), []byte("x\n"), 0o644)
	os.Symlink("f2", filepath.Join(dir, "link"))
}

// traced is what a program did in its directory, by relative path.
type traced struct {
	read, wrote map[string]bool
	execs       []string // programs it started besides itself
}

// differ runs argv under strace and compares what it did with its rule; "" when they agree.
func differ(t *testing.T, strace string, dc diffCommand, argv []string) string {
	dir := t.TempDir()
	fixture(dir)
	if dc.setup != nil {
		dc.setup(dir)
	}
	out := filepath.Join(t.TempDir(), "trace")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strace, append([]string{"-f", "-qq", "-y", "-s", "4096", "-o", out,
		"-e", "trace=chdir,fchdir,getdents64,open,openat,openat2,creat,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,link,linkat,symlink,symlinkat,truncate,utimensat,utime,utimes,chmod,fchmodat,chown,fchownat,lchown,execve,execveat",
		"--"}, argv...)...)
	cmd.Dir = dir
	// A program's temporary files (sort's) go to its TMPDIR, which every program may use:
	// elsewhere than the directory compared.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C", "TMPDIR=" + t.TempDir()}
	cmd.Stdin = nil
	cmd.Run() // the status does not matter: what it did does
	tr, err := readTrace(out, dir, argv[0])
	if err != nil {
		return "strace: " + err.Error()
	}
	u := use{ctx: &Context{Cwd: dir, Home: dir, Roots: []string{dir}, Env: cmd.Env}, dir: "."}
	evaluate(&u, argv)
	named := append(slices.Clone(u.paths), u.reads...)
	covers := func(p string) bool {
		for _, n := range named {
			n = filepath.Clean(n)
			if filepath.Base(n) == newEntry && filepath.Dir(n) == filepath.Dir(p) {
				return true // a new entry of that directory
			}
			if n == "." || n == p || strings.HasPrefix(p, n+"/") {
				return true
			}
		}
		return false
	}
	var problems []string
	for _, set := range []map[string]bool{tr.read, tr.wrote} {
		for p := range set {
			if !covers(p) {
				problems = append(problems, fmt.Sprintf("it opened %s, which the rule does not name (it names %q)", p, named))
			}
		}
	}
	if len(tr.wrote) > 0 && !u.own.Has(Write) {
		problems = append(problems, fmt.Sprintf("it wrote %v, the rule says %s", keys(tr.wrote), u.own))
	}
	if len(tr.execs) > 0 && !u.own.Has(Exec) {
		problems = append(problems, fmt.Sprintf("it ran %v, the rule says %s", tr.execs, u.own))
	}
	slices.Sort(problems)
	return strings.Join(problems, "; ")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var (
	traceLine = regexp.MustCompile(`^(\d+) +(\w+)\((.*)\) += (-?\d+)`)
	quoted    = regexp.MustCompile(`^"((?:[^"\\]|\\.)*)"`)
	fdPath    = regexp.MustCompile(`^(?:-?\d+|AT_FDCWD)<(.*)>$`)
)

// splitArgs splits a call's arguments at the commas between them, quotes kept whole.
func splitArgs(s string) []string {
	var out []string
	start, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// readTrace reads strace's output: the paths in dir each successful call read or wrote.
// A directory opened to be listed counts as read; a path that did not exist and was not
// made, nothing.
func readTrace(file, dir, self string) (traced, error) {
	tr := traced{read: map[string]bool{}, wrote: map[string]bool{}}
	f, err := os.Open(file)
	if err != nil {
		return tr, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	started := false
	cwd := map[string]string{} // by pid: a program may chdir (mkdir -p does, into each parent)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(m[4], "-") {
			continue // unfinished, or failed: it did nothing
		}
		pid, call, args := m[1], m[2], m[3]
		here := cwd[pid]
		if here == "" {
			here = dir
		}
		switch call {
		case "chdir":
			if q := quoted.FindStringSubmatch(args); q != nil {
				p := q[1]
				if !filepath.IsAbs(p) {
					p = filepath.Join(here, p)
				}
				cwd[pid] = p
			}
			continue
		case "fchdir":
			if d := fdPath.FindStringSubmatch(args); d != nil {
				cwd[pid] = d[1]
			}
			continue
		case "getdents64": // a directory listed: its names are read
			if d := fdPath.FindStringSubmatch(splitArgs(args)[0]); d != nil {
				if rel, ok := inDir(d[1], dir); ok {
					tr.read[rel] = true
				}
			}
			continue
		}
		// With -y, a descriptor argument shows its path: "3</w/dir>"; a path after one is
		// relative to it.
		var paths []string
		base := ""
		for _, part := range splitArgs(args) {
			if d := fdPath.FindStringSubmatch(part); d != nil {
				base = d[1]
				continue
			}
			q := quoted.FindStringSubmatch(part)
			if q == nil {
				continue
			}
			s, err := strconv.Unquote(`"` + q[1] + `"`)
			if err != nil {
				s = q[1]
			}
			switch {
			case base != "" && !filepath.IsAbs(s):
				s = filepath.Join(base, s)
			case !filepath.IsAbs(s):
				s = filepath.Join(here, s)
			}
			base = ""
			paths = append(paths, s)
		}
		if strings.HasPrefix(call, "execve") {
			if !started {
				started = true // the program itself
			} else if len(paths) > 0 {
				tr.execs = append(tr.execs, paths[0])
			}
			continue
		}
		write := true
		switch call {
		case "open", "openat", "openat2":
			if strings.Contains(args, "O_PATH") || strings.Contains(args, "O_DIRECTORY") {
				continue // a handle to the name (a directory's is read by getdents64)
			}
			write = strings.Contains(args, "O_WRONLY") || strings.Contains(args, "O_RDWR") ||
				strings.Contains(args, "O_CREAT") || strings.Contains(args, "O_TRUNC")
		case "symlink", "symlinkat":
			paths = paths[len(paths)-1:] // the target is text, the link the path made
		}
		for _, p := range paths {
			rel, ok := inDir(p, dir)
			if !ok {
				continue
			}
			if fi, err := os.Stat(p); err == nil && fi.IsDir() && !write && call != "execve" {
				continue // a directory opened to move about in it; a listing is getdents64's
			}
			if write {
				tr.wrote[rel] = true
			} else {
				tr.read[rel] = true
			}
		}
	}
	return tr, sc.Err()
}

// inDir is p relative to dir, when it lies in it (a relative p is relative to dir).
func inDir(p, dir string) (string, bool) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}
