package orchestrator

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// grepOracle is fs.grep's content mode over files in the walk's order, written the plain
// way: every line of every file split out, the matches and their context, the first limit.
func grepOracle(files []string, contents map[string]string, re *regexp.Regexp, before, after, limit int) (lines []FSGrepLine, truncated bool) {
	for _, name := range files {
		ls := strings.Split(contents[name], "\n")
		if len(ls) > 0 && ls[len(ls)-1] == "" {
			ls = ls[:len(ls)-1]
		}
		shown := -1
		for i, l := range ls {
			if !re.MatchString(l) {
				continue
			}
			for j := max(i-before, shown+1); j <= i; j++ {
				lines = append(lines, FSGrepLine{Path: "/work/" + name, Line: j + 1, Text: ls[j], Context: j != i})
				shown = j
			}
			for j := i + 1; j < len(ls) && j <= i+after; j++ {
				if re.MatchString(ls[j]) {
					break
				}
				lines = append(lines, FSGrepLine{Path: "/work/" + name, Line: j + 1, Text: ls[j], Context: true})
				shown = j
			}
		}
	}
	if len(lines) > limit {
		return lines[:limit], true
	}
	return lines, false
}

// Whatever the files, the context and the limit, fs.grep's reply is the plain reading's:
// the same lines in the walk's order (the workers' order and the bound on what they hold
// change nothing), truncated where the limit falls.
func TestFSGrepMatchesOracle(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"alpha", "beta", "", "alpha beta", "gamma", "x"}
	for round := range 40 {
		fx := newFSFixture(t)
		dir := filepath.Join(fx.ws, "g")
		os.Mkdir(dir, 0o755)
		contents := map[string]string{}
		var files []string
		for i := range 1 + rng.IntN(30) {
			var b strings.Builder
			for range rng.IntN(40) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteString("\n")
			}
			if rng.IntN(3) == 0 {
				b.WriteString("alpha unterminated")
			}
			name := fmt.Sprintf("g/f%03d.txt", i)
			files = append(files, name) // the walk's order: sorted names
			contents[name] = b.String()
			if err := os.WriteFile(filepath.Join(fx.ws, name), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := fx.config(nil, nil)
		cfg.MaxRead = 1 << 20
		h := FSHandlers(cfg)
		before, after, limit := rng.IntN(4), rng.IntN(4), 1+rng.IntN(60)
		pattern := []string{"alpha", "^$", "beta$", "^x"}[rng.IntN(4)]
		r, err := tree[FSGrepReply](t, h, TypeFSGrep, FSGrepRequest{Path: "/work/g", Pattern: pattern, Before: before, After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		want, truncated := grepOracle(files, contents, regexp.MustCompile(pattern), before, after, limit)
		if fmt.Sprint(r.Lines) != fmt.Sprint(want) || r.Truncated != truncated {
			t.Fatalf("round %d (%q, -B %d -A %d, limit %d):\n got %v %v\nwant %v %v", round, pattern, before, after, limit, r.Lines, r.Truncated, want, truncated)
		}
	}
}

// A grep of files that are all newlines (the same file under many names, as hard links make
// it) holds only what its reply can show: the host's allocations stay near the bytes read,
// not millions of lines per file (16 GiB for 8 names of a 16 MiB file, before).
func TestFSGrepBoundedByReply(t *testing.T) {
	fx := newFSFixture(t)
	dir := filepath.Join(fx.ws, "nl")
	os.Mkdir(dir, 0o755)
	const size = 256 << 10
	if err := os.WriteFile(filepath.Join(dir, "f0"), []byte(strings.Repeat("\n", size)), 0o644); err != nil {
		t.Fatal(err)
	}
	const names = 40
	for i := 1; i < names; i++ {
		if err := os.Link(filepath.Join(dir, "f0"), filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fx.config(nil, nil)
	cfg.MaxRead = size
	h := FSHandlers(cfg)
	// What one file gives is only what the reply can show, whatever the file holds.
	fd, err := unix.Open(filepath.Join(dir, "f0"), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	g := &grepper{c: &cfg, re: regexp.MustCompile("^"), body: &FSGrepRequest{Mode: GrepContent, Before: 5}, limit: 10}
	if found := g.scan(grepFile{fd: fd, size: size, sandbox: "/work/nl/f0"}); len(found.lines) != 11 {
		t.Errorf("one file of %d lines gave %d lines for a reply of 10", size, len(found.lines))
	}
	if raceOn {
		return // the allocations below are counted without the race detector (see raceOn)
	}
	for _, mode := range []string{GrepContent, GrepCount, GrepFiles} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		r, err := tree[FSGrepReply](t, h, TypeFSGrep, FSGrepRequest{Path: "/work/nl", Pattern: "^", Mode: mode, Before: 5})
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		if mode == GrepContent && (len(r.Lines) != DefaultTreeLimit || !r.Truncated) {
			t.Fatalf("%s: %d lines, truncated %v", mode, len(r.Lines), r.Truncated)
		}
		// Each name's bytes are read once (10 MiB); a line each, as before, is 48 bytes a line
		// and a copy of the file: over 500 MiB.
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s: %d MiB allocated for a reply of %d lines over %d MiB of files", mode, alloc>>20, len(r.Lines), names*size>>20)
		}
	}
}
