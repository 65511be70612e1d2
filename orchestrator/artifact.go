package orchestrator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/orchestrator/output"
)

// ArtifactReport says what a job's artifact (the file that receives its output) holds of it.
type ArtifactReport struct {
	Written int64 `json:"written"` // every byte the job's steps printed
	Kept    int64 `json:"kept"`    // the bytes the file holds
	// Dropped are the bytes between the first Head and the last Tail of the output that the
	// file does not hold (past its cap, output.artifactBytes): Written - Kept.
	Dropped int64  `json:"dropped"`
	Head    int64  `json:"head,omitempty"`
	Tail    int64  `json:"tail,omitempty"`
	Cap     int64  `json:"cap,omitempty"`   // the cap the job ran with; 0: none
	Error   string `json:"error,omitempty"` // the file could not be written: why
}

// String is the report as a person or the agent reads it (no path), "" when nothing was
// dropped.
func (a *ArtifactReport) String() string {
	if a == nil || a.Dropped == 0 && a.Error == "" {
		return ""
	}
	if a.Dropped == 0 {
		return fmt.Sprintf("[the job's output file is incomplete: %s]", a.Error)
	}
	return fmt.Sprintf("[the job's output file kept the first %s and the last %s of its %s; %s between them dropped (cap %s)]",
		count(a.Head, "byte"), count(a.Tail, "byte"), count(a.Written, "byte"), count(a.Dropped, "byte"), count(a.Cap, "byte"))
}

func count(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// artifact is a job's artifact file, written as output comes, bounded by its Spill. Past its
// cap, where the ring stands is known only from how many bytes were written: that count is
// kept in a mark file beside it (path + markSuffix, "WRITTEN CAP TURNED"), rewritten after
// every write, so that a host that takes the job up after this one died goes on at the right
// place. A mark behind the file by the last write is harmless: that output is sent again by
// the kernel, and written again to the same place.
//
// An artifact is used under its job's lock.
type artifact struct {
	path    string
	spill   output.Spill
	f       *os.File
	mark    *os.File // nil until the output passes the cap
	written int64
	err     error // the first write that failed
	ordered bool  // put in order already, by a host that died before it removed the mark
}

// markSuffix names an artifact's mark file.
const markSuffix = ".mark"

// createArtifact makes a job's artifact anew (0600), with the cap of spill.
func createArtifact(path string, spill output.Spill) (*artifact, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	for _, left := range []string{markSuffix, turnSuffix} {
		if err := os.Remove(path + left); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, err
		}
	}
	return &artifact{path: path, spill: spill, f: f}, nil
}

// openArtifact opens the artifact of a job taken up again. Its count and cap are the mark's
// when it has passed its cap, else its length and spill's.
func openArtifact(path string, spill output.Spill) (*artifact, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	a := &artifact{path: path, spill: spill, f: f}
	m, err := readMark(path)
	switch {
	case err == nil && m.turned:
		// The host that ended it died as it put the file in order: that is finished, and
		// the count is the mark's.
		f.Close()
		if err := a.turnDone(); err != nil {
			return nil, err
		}
		if a.f, err = os.OpenFile(path, os.O_RDWR, 0o600); err != nil {
			return nil, err
		}
		a.written, a.spill, a.ordered = m.written, output.Spill{Cap: m.cap}, true
		return a, nil
	case err == nil:
		a.written, a.spill = m.written, output.Spill{Cap: m.cap}
		if a.mark, err = os.OpenFile(path+markSuffix, os.O_RDWR, 0o600); err != nil {
			f.Close()
			return nil, err
		}
		return a, nil
	case !errors.Is(err, fs.ErrNotExist):
		f.Close()
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	a.written = fi.Size()
	return a, nil
}

// write keeps p where the spill says, and counts it. A failed write is remembered and ends
// the writing; the bytes still count as written.
func (a *artifact) write(p []byte) {
	if a.err == nil {
		for _, pc := range a.spill.Pieces(a.written, int64(len(p))) {
			if _, err := a.f.WriteAt(p[pc.From:pc.From+pc.Len], pc.At); err != nil {
				a.err = err
				break
			}
		}
	}
	a.written += int64(len(p))
	if a.err == nil && a.spill.Capped() && a.written > a.spill.Cap {
		a.err = a.saveMark(false)
	}
}

// saveMark writes the mark: the count of bytes written, the cap, and whether the file is
// being put in order.
func (a *artifact) saveMark(turned bool) error {
	if a.mark == nil {
		f, err := os.OpenFile(a.path+markSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		a.mark = f
	}
	t := 0
	if turned {
		t = 1
	}
	// Fixed width: each write replaces the whole mark in one write of a few bytes.
	_, err := a.mark.WriteAt(fmt.Appendf(nil, "%020d %020d %d\n", a.written, a.spill.Cap, t), 0)
	return err
}

// mark is an artifact's mark as read.
type mark struct {
	written, cap int64
	turned       bool
}

func readMark(path string) (mark, error) {
	b, err := os.ReadFile(path + markSuffix)
	if err != nil {
		return mark{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return mark{}, fmt.Errorf("artifact mark %s: %q", path+markSuffix, b)
	}
	var m mark
	var errs [2]error
	m.written, errs[0] = strconv.ParseInt(f[0], 10, 64)
	m.cap, errs[1] = strconv.ParseInt(f[1], 10, 64)
	m.turned = f[2] == "1"
	if err := errors.Join(errs[:]...); err != nil || m.cap <= 0 || m.written < m.cap {
		return mark{}, fmt.Errorf("artifact mark %s: %q", path+markSuffix, b)
	}
	return m, nil
}

// report says what the file holds of the output written so far.
func (a *artifact) report() *ArtifactReport {
	kept, dropped := a.spill.Kept(a.written)
	r := &ArtifactReport{Written: a.written, Kept: kept, Dropped: dropped, Cap: a.spill.Cap}
	if dropped > 0 {
		r.Head, r.Tail = a.spill.Head(), a.spill.Tail()
	}
	if a.err != nil {
		r.Error = a.err.Error()
	}
	return r
}

// readAt writes to w the bytes of the output from offset off, n of them, that the file holds.
func (a *artifact) readAt(w io.Writer, off, n int64) {
	for end := min(off+n, a.written); off < end; {
		if !a.spill.Holds(off, a.written) {
			off = a.written - a.spill.Tail() // past the head, the next byte held starts the tail
			continue
		}
		at := a.spill.Slot(off)
		k := end - off
		if a.spill.Capped() && at >= a.spill.Head() {
			k = min(k, a.spill.Cap-at) // to the end of the ring
		} else if a.spill.Capped() {
			k = min(k, a.spill.Head()-at)
		}
		if _, err := io.Copy(w, io.NewSectionReader(a.f, at, k)); err != nil {
			return
		}
		off += k
	}
}

// finish puts the file in order (the ring turned, so it reads head then tail), removes the
// mark and closes the file.
func (a *artifact) finish() error {
	defer a.f.Close()
	t := a.spill.Turn(a.written)
	if t == 0 || a.ordered {
		if a.mark != nil {
			a.mark.Close()
			os.Remove(a.path + markSuffix)
		}
		return nil
	}
	// The ordered file is made beside it and renamed over it, so that a host that dies on
	// the way leaves either file whole; the mark says which (turnDone).
	tmp, err := os.OpenFile(a.path+turnSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	h := a.spill.Head()
	for _, r := range [][2]int64{{0, h}, {h + t, a.spill.Cap}, {h, h + t}} {
		if _, err := a.f.Seek(r[0], io.SeekStart); err != nil {
			tmp.Close()
			return err
		}
		if _, err := io.CopyN(tmp, a.f, r[1]-r[0]); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := a.saveMark(true); err != nil {
		return err
	}
	a.mark.Close()
	return a.turnDone()
}

// turnSuffix names the file an artifact is put in order into.
const turnSuffix = ".turn"

// turnDone ends putting an artifact in order: the ordered file, when it is still there, takes
// the artifact's place; then the mark goes.
func (a *artifact) turnDone() error {
	if err := os.Rename(a.path+turnSuffix, a.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Remove(a.path + markSuffix)
}

// SettleArtifact puts in order the artifact of a job that ended with a host that died (a
// lost job) and says what it holds.
func SettleArtifact(path string) (*ArtifactReport, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	a, err := openArtifact(path, output.Spill{})
	if err != nil {
		return nil, err
	}
	rep := a.report()
	return rep, a.finish()
}
