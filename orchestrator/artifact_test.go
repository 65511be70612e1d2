package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator/output"
)

const mib = 1 << 20

// seqOutput is what seq 1 n prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// A job whose output passes the artifact's cap: the file holds the cap, exactly the output's
// first half-cap and last half-cap of bytes, in order; the report counts every byte the step
// printed (as its window does), and what the file dropped.
//
// law: job_output_bounded
// law: job_no_silent_loss
func TestJobArtifactCapped(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{ArtifactBytes: mib})
	art := filepath.Join(t.TempDir(), "job.out")
	res, err := s.Run(context.Background(), Call{Script: "seq 1 1000000", Artifact: art})
	if err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %+v", err, res)
	}
	whole := seqOutput(1000000)
	b, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != mib {
		t.Fatalf("the artifact holds %d bytes, its cap is %d", len(b), mib)
	}
	if !bytes.Equal(b[:mib/2], whole[:mib/2]) || !bytes.Equal(b[mib/2:], whole[len(whole)-mib/2:]) {
		t.Fatal("the artifact is not the output's first and last half-cap of bytes")
	}
	a := res.Saved
	if a == nil || a.Written != int64(len(whole)) || a.Written != res.Steps[0].Stdout.TotalBytes ||
		a.Kept != mib || a.Dropped != int64(len(whole))-mib || a.Head != mib/2 || a.Tail != mib/2 {
		t.Fatalf("the report: %+v", a)
	}
	if !strings.Contains(res.String(), fmt.Sprintf("%d bytes between them dropped", a.Dropped)) {
		t.Errorf("the result does not say what the artifact dropped:\n%s", res)
	}
	if _, err := os.Stat(art + markSuffix); !os.IsNotExist(err) {
		t.Errorf("the mark is left: %v", err)
	}
	if fi, _ := os.Stat(art); fi.Mode().Perm() != 0o600 {
		t.Errorf("artifact mode %v", fi.Mode())
	}
}

// Output within the cap, and output with no cap: every byte, nothing dropped.
//
// law: job_cap_drops_only_excess
// law: job_optout_keeps_all
func TestJobArtifactWithinCap(t *testing.T) {
	whole := seqOutput(100000)
	for _, c := range []int64{int64(len(whole)), 0} {
		s := openLocal(t, t.TempDir(), Config{ArtifactBytes: c})
		art := filepath.Join(t.TempDir(), "job.out")
		res, err := s.Run(context.Background(), Call{Script: "seq 1 100000", Artifact: art})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(art)
		if !bytes.Equal(b, whole) || res.Saved == nil || res.Saved.Dropped != 0 || res.Saved.Kept != int64(len(whole)) {
			t.Errorf("cap %d: the artifact holds %d bytes of %d; report %+v", c, len(b), len(whole), res.Saved)
		}
	}
}

// A detached job running yes, under a 1 MiB cap and a time limit: the limit kills it with an
// end that says so; its artifact holds the cap, each byte the one yes printed at its place
// (y at even offsets of the output, a newline at odd ones: the tail is at the right offset),
// and the report counts every byte the step printed.
//
// law: job_output_bounded
// law: job_no_silent_loss
func TestYesJobCapped(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{ArtifactBytes: mib, JobTimeout: 2 * time.Second})
	art := filepath.Join(t.TempDir(), "job.out")
	ctx := context.Background()
	res, err := s.Run(ctx, Call{Script: "yes", Artifact: art, Budget: 100 * time.Millisecond})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	j, _ := s.Job(res.End.Job)
	final, err := j.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if final.End.Kind != Killed || final.End.Code != CodeTimeout || !strings.Contains(final.String(), "its time limit") {
		t.Fatalf("the end: %+v", final.End)
	}
	a := final.Saved
	b, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != mib || a == nil || a.Kept != mib || a.Written <= 2*mib || a.Dropped != a.Written-mib {
		t.Fatalf("the artifact: %d bytes; report %+v", len(b), a)
	}
	if out := final.Steps[0].Stdout; a.Written != out.TotalBytes+final.Steps[0].Stderr.TotalBytes {
		t.Fatalf("the report counts %d bytes, the step printed %d", a.Written, out.TotalBytes)
	}
	for i, c := range b {
		off := int64(i)
		if off >= a.Head {
			off += a.Dropped
		}
		want := byte('y')
		if off%2 == 1 {
			want = '\n'
		}
		if c != want {
			t.Fatalf("byte %d of the file (%d of the output) is %q", i, off, c)
		}
	}
}

// The time limit kills a sleeping job, detached or not, with an end that says so; the
// no-output timeout kills a quiet one.
func TestCallLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		budget time.Duration
		code   string
	}{
		{"timeout", Config{JobTimeout: 500 * time.Millisecond}, 100 * time.Millisecond, CodeTimeout},
		{"timeout, blocking", Config{JobTimeout: 500 * time.Millisecond}, -1, CodeTimeout},
		{"no output", Config{NoOutputTimeout: 500 * time.Millisecond}, 100 * time.Millisecond, CodeNoOutput},
		{"no output, blocking", Config{NoOutputTimeout: 500 * time.Millisecond}, -1, CodeNoOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openLocal(t, dir, tc.cfg)
			ctx := context.Background()
			res, err := s.Run(ctx, Call{Script: "echo start; sh -c 'echo $$ > pid; exec sleep 300'", Budget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.End.Kind == Detached {
				j, _ := s.Job(res.End.Job)
				if res, err = j.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if res.End.Kind != Killed || res.End.Code != tc.code || res.End.Status != 137 || res.Steps[0].Stdout.Text != "start\n" {
				t.Fatalf("the end: %s", res)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "pid"))
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if pid <= 0 {
				t.Fatalf("no pid: %q", b)
			}
			waitGone(t, pid)
		})
	}
}

// waitGone waits for a process to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := await.Exit(ctx, pid); err != nil {
		t.Fatalf("process %d still runs: %v", pid, err)
	}
}

// An artifact whose host died past its cap is taken up at the place its mark says: the output
// a new host writes goes on where the last left it, and the file ends head then tail.
//
// law: job_no_silent_loss
func TestArtifactTakenUp(t *testing.T) {
	whole := seqOutput(300000)
	path := filepath.Join(t.TempDir(), "job.out")
	spill := output.Spill{Cap: 100_000}
	a, err := createArtifact(path, spill)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(whole) / 2
	for p := whole[:cut]; len(p) > 0; p = p[min(len(p), 4093):] {
		a.write(p[:min(len(p), 4093)])
	}
	a.f.Close() // the host dies
	a.mark.Close()
	b, err := openArtifact(path, output.Spill{})
	if err != nil {
		t.Fatal(err)
	}
	if b.written != int64(cut) || b.spill != spill {
		t.Fatalf("taken up at %d with %+v, want %d with %+v", b.written, b.spill, cut, spill)
	}
	var held bytes.Buffer
	b.readAt(&held, 0, int64(cut))
	if want := append(bytes.Clone(whole[:spill.Head()]), whole[int64(cut)-spill.Tail():cut]...); !bytes.Equal(held.Bytes(), want) {
		t.Fatalf("it holds %d bytes, not the head and tail so far", held.Len())
	}
	b.write(whole[cut:])
	rep := b.report()
	if err := b.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := append(bytes.Clone(whole[:spill.Head()]), whole[int64(len(whole))-spill.Tail():]...)
	if !bytes.Equal(got, want) || rep.Written != int64(len(whole)) || rep.Dropped != int64(len(whole))-spill.Cap {
		t.Fatalf("the file: %d bytes; report %+v", len(got), rep)
	}
}

// A host that died while it put the file in order left the ordered copy and a mark saying so:
// the next one that opens the artifact finishes the rename, and the file is whole.
func TestArtifactTurnTakenUp(t *testing.T) {
	whole := seqOutput(50000)
	path := filepath.Join(t.TempDir(), "job.out")
	a, err := createArtifact(path, output.Spill{Cap: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	a.write(whole)
	want := append(bytes.Clone(whole[:5000]), whole[len(whole)-5000:]...)
	if err := os.WriteFile(path+turnSuffix, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.saveMark(true); err != nil {
		t.Fatal(err)
	}
	a.f.Close() // the host dies before the rename
	rep, err := SettleArtifact(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, want) || rep.Written != int64(len(whole)) || rep.Dropped != int64(len(whole)-len(want)) {
		t.Fatalf("the file: %d bytes; report %+v", len(got), rep)
	}
	for _, left := range []string{markSuffix, turnSuffix} {
		if _, err := os.Stat(path + left); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", left, err)
		}
	}
}

// An artifact file written in random chunks under a random cap (or none), its host dying at
// random moments and a new one taking it up: at the end it holds the output's first Head and
// last Tail bytes (all of it within the cap), in order, never more than the cap at any moment,
// and its report's kept + dropped is every byte written.
//
// law: job_output_bounded
// law: job_no_silent_loss
// law: job_cap_drops_only_excess
func TestArtifactFileProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 6))
	dir := t.TempDir()
	for i := range 300 {
		spill := output.Spill{Cap: int64(r.IntN(200))}
		out := make([]byte, r.IntN(2000))
		for k := range out {
			out[k] = byte('a' + r.IntN(26))
		}
		path := filepath.Join(dir, fmt.Sprintf("a%d", i))
		a, err := createArtifact(path, spill)
		if err != nil {
			t.Fatal(err)
		}
		for rest := out; len(rest) > 0; {
			n := min(len(rest), r.IntN(150)+1)
			a.write(rest[:n])
			rest = rest[n:]
			if fi, _ := a.f.Stat(); spill.Capped() && fi.Size() > spill.Cap {
				t.Fatalf("cap %d: the file holds %d bytes", spill.Cap, fi.Size())
			}
			if r.IntN(10) == 0 { // the host dies; a new one takes the job up
				a.f.Close()
				if a.mark != nil {
					a.mark.Close()
				}
				if a, err = openArtifact(path, spill); err != nil {
					t.Fatal(err)
				}
			}
		}
		rep := a.report()
		if err := a.finish(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		want := out
		if spill.Capped() && int64(len(out)) > spill.Cap {
			want = append(bytes.Clone(out[:spill.Head()]), out[int64(len(out))-spill.Tail():]...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("cap %d, %d bytes: the file is not the head and the tail", spill.Cap, len(out))
		}
		if rep.Written != int64(len(out)) || rep.Kept != int64(len(got)) || rep.Kept+rep.Dropped != rep.Written {
			t.Fatalf("cap %d, %d bytes, the file %d: report %+v", spill.Cap, len(out), len(got), rep)
		}
	}
}
