package orchestrator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/policy"
)

// refuseStep refuses the step at index k (-1: none) and records which it was asked about.
type refuseStep struct {
	k     int
	mu    sync.Mutex
	asked []int
}

func (g *refuseStep) Decide(_ context.Context, st Step) Verdict {
	g.mu.Lock()
	g.asked = append(g.asked, st.Index)
	g.mu.Unlock()
	if st.Index == g.k {
		return Verdict{Code: "denied", Message: "no"}
	}
	return Verdict{Run: true}
}

// law: gate_prefix, gate_deny_stops, gate_finish_runs_all
// Over random scripts of steps joined by ;, &&, || and newlines, each leaving a mark, and a
// random refusal point (or none): the steps that ran are the first steps of the script, in
// order, up to the refusal; the refused step and every later one did not run; a script with
// no refusal ran every step.
func TestGateLawsRandomScripts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	joins := []string{"; ", " && ", "\n"}
	for n := range 40 {
		dir := t.TempDir()
		steps := 1 + r.IntN(6)
		var b strings.Builder
		for i := range steps {
			if i > 0 {
				b.WriteString(joins[r.IntN(len(joins))])
			}
			fmt.Fprintf(&b, "echo %d >> order", i)
		}
		k := r.IntN(steps+1) - 1 // -1: nothing refused
		if k == steps-1 && r.IntN(2) == 0 {
			k = -1
		}
		g := &refuseStep{k: k}
		s := openLocal(t, dir, Config{Gatekeeper: g})
		res, err := s.Bash(context.Background(), b.String())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "order"))
		want := steps
		if k >= 0 {
			want = k
		}
		var wantOrder strings.Builder
		for i := range want {
			fmt.Fprintf(&wantOrder, "%d\n", i)
		}
		if string(got) != wantOrder.String() || len(res.Steps) != want {
			t.Fatalf("script %d %q refused at %d: ran %q (%d steps), want %q", n, b.String(), k, got, len(res.Steps), wantOrder.String())
		}
		if k >= 0 && (res.End.Kind != Refused || res.End.Step != k) {
			t.Fatalf("script %d: end %+v, want refused at %d", n, res.End, k)
		}
		if k < 0 && res.End.Kind != Finished {
			t.Fatalf("script %d: end %+v, want finished", n, res.End)
		}
		s.Close()
	}
}

// law: outside_runs_only_by_the_gateway
// A session whose only client is a gateway, with an auto set without outside: a write
// outside every root, neither protected nor secret, runs — and only by the gateway rule:
// with no client at all it is refused.
func TestOutsideRunsOnlyByTheGateway(t *testing.T) {
	auto, _ := policy.ParseAutoSet([]string{"read", "write"})
	outside := t.TempDir()
	for _, gateway := range []bool{true, false} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		s := openLocal(t, t.TempDir(), Config{Policy: Policy{Auto: &auto, AuditFile: audit}})
		if gateway {
			s.Attach(&funcClient{kind: Gateway, notify: func(Event) {}})
		}
		target := filepath.Join(outside, fmt.Sprintf("by-gateway-%v", gateway))
		res, err := s.Bash(context.Background(), "touch "+target)
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(target)
		b, _ := os.ReadFile(audit)
		switch {
		case gateway && (res.End.Kind != Finished || statErr != nil || !strings.Contains(string(b), `"decided_by":"gateway"`)):
			t.Errorf("with a gateway: %s, %v\n%s", res, statErr, b)
		case !gateway && (res.End.Kind != Refused || statErr == nil):
			t.Errorf("with no client: %s, %v", res, statErr)
		}
	}
}

// law: guarded_refused_from_the_phone
// A session whose only client is a gateway refuses a secret read at once, whatever the auto
// set: the gateway is never shown a question.
func TestGuardedRefusedFromThePhone(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("KEY\n"), 0o600)
	for _, set := range [][]string{nil, {"read"}, {"read", "write", "exec", "net", "outside", "protected"}} {
		auto, _ := policy.ParseAutoSet(set)
		s := openLocal(t, t.TempDir(), Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Policy: Policy{Auto: &auto}})
		var shown atomic.Int32
		s.Attach(&funcClient{kind: Gateway, notify: func(Event) { shown.Add(1) }})
		res, err := s.Bash(context.Background(), "cat ~/.ssh/id_rsa")
		if err != nil || res.End.Kind != Refused || res.End.Code != "gateway_refused" || strings.Contains(res.String(), "KEY") || shown.Load() != 0 {
			t.Errorf("auto %v: %v %s (gateway shown %d events)", set, err, res, shown.Load())
		}
	}
}

// law: stream_settles_once, stream_settle_carries_all
// A call whose output streams (Live) settles exactly once, at its end: nothing streams after
// it settled, and its result carries every byte that streamed, in order, over random
// outputs on both descriptors.
func TestStreamSettlesOnceWithAll(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 17))
	s := openLocal(t, t.TempDir(), Config{})
	for range 15 {
		n, m := r.IntN(200_000), r.IntN(5_000)
		script := fmt.Sprintf("head -c %d /dev/urandom | base64; head -c %d /dev/urandom | base64 >&2", n, m)
		var mu sync.Mutex
		var live [2]strings.Builder
		settled := false
		late := false
		res, err := s.Run(context.Background(), Call{Script: script, Live: func(_, fd int, data []byte) {
			mu.Lock()
			defer mu.Unlock()
			late = late || settled
			live[fd-1].Write(data)
		}})
		mu.Lock()
		settled = true
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		for _, st := range res.Steps {
			out.WriteString(st.Stdout.Text)
			errOut.WriteString(st.Stderr.Text)
		}
		mu.Lock()
		if late || out.String() != live[0].String() || errOut.String() != live[1].String() {
			t.Fatalf("%s: late %v; stdout %d/%d bytes, stderr %d/%d", script, late, out.Len(), live[0].Len(), errOut.Len(), live[1].Len())
		}
		mu.Unlock()
	}
}

// law: secrets_need_yes
// Random sequences of writes an agent might make — through links it makes first, relative
// names from other directories, moves, copies, in-place edits, redirections, in one script
// or in pipelines, inside and outside the grammar — run with the widest auto set short of
// secret and nobody attached: afterwards every secret of the home is as it was and no new
// entry appears in its credential directory. The same scripts, answered yes, do change
// secrets: the writes reach them.
func TestSecretsNeedYes(t *testing.T) {
	secrets := map[string]string{".ssh/id_rsa": "KEY\n", ".ssh/authorized_keys": "ssh-ed25519 AAAA\n", ".netrc": "machine x password y\n"}
	newHome := func() string {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
		for p, c := range secrets {
			os.WriteFile(filepath.Join(home, p), []byte(c), 0o600)
		}
		return home
	}
	// changed says what of a home's secrets is not as it was.
	changed := func(home string) string {
		for p, c := range secrets {
			b, err := os.ReadFile(filepath.Join(home, p))
			fi, _ := os.Lstat(filepath.Join(home, p))
			if err != nil || string(b) != c || fi == nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSymlink != 0 {
				return fmt.Sprintf("%s: %q, %v, %v", p, b, err, fi)
			}
		}
		if entries, _ := os.ReadDir(filepath.Join(home, ".ssh")); len(entries) != 2 {
			return fmt.Sprintf("~/.ssh holds %v", entries)
		}
		return ""
	}
	auto, _ := policy.ParseAutoSet([]string{"read", "write", "exec", "net", "outside", "protected"})
	targets := []string{"~/.ssh/id_rsa", "~/.ssh/authorized_keys", "~/.netrc", "~/.ssh/new", "k", "d/k", "link/id_rsa", "../k"}
	makers := []string{
		"ln -sf ~/.ssh/id_rsa k", "ln -sf ~/.ssh link", "mkdir -p d && ln -sf ../link/authorized_keys d/k",
		"ln -sf ~/.netrc ../k", "ln -sf ~/.ssh/id_rsa k2 && mv k2 k", "true",
	}
	writes := []string{
		"echo x > %s", "echo x >> %s", "printf x | tee %s", "sed -i s/K/X/ %s", "cp /etc/hostname %s",
		"touch %s", "truncate -s 0 %s", "rm -f %s", "chmod 777 %s", "dd if=/etc/hostname of=%s",
		"install /etc/hostname %s",
	}
	forms := []string{"%s; %s", "%s && %s", "%s | %s", "for i in 1; do %s; %s; done", "sh -c '%s; %s'", "{ %s; %s; }"}
	r := rand.New(rand.NewPCG(7, 13))
	reached := 0
	for n := range 60 {
		w := fmt.Sprintf(writes[r.IntN(len(writes))], targets[r.IntN(len(targets))])
		script := fmt.Sprintf(forms[r.IntN(len(forms))], makers[r.IntN(len(makers))], w)
		for _, yes := range []bool{false, true} {
			home := newHome()
			ws := filepath.Join(t.TempDir(), "ws")
			os.MkdirAll(ws, 0o755)
			s := openLocal(t, ws, Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Policy: Policy{Auto: &auto}})
			if yes {
				answer := true
				c := &testClient{kind: Interactive, answer: &answer}
				c.s = s
				s.Attach(c)
			}
			if _, err := s.Bash(context.Background(), script); err != nil {
				t.Fatal(err)
			}
			s.Close()
			what := changed(home)
			switch {
			case !yes && what != "":
				t.Fatalf("script %d %q, nobody attached, changed %s", n, script, what)
			case yes && what != "":
				reached++
			}
		}
	}
	if reached < 20 {
		t.Fatalf("only %d of 60 scripts changed a secret when answered yes: the test does not reach them", reached)
	}
}

// law: job_ends_once, job_end_is_final, job_kill_ends_now, gate_prefix, gate_deny_stops
// Over random jobs — n steps that each print their number, then wait on a named pipe the
// test opens when it wants the job to go on — and a random fate (run to the end, killed
// while a step waits, refused at a random step): the job ends once, as its fate says, at
// once when killed; what it printed before its end is in its result, nothing after; and once
// ended, nothing changes it: not the script's own end after a kill, not a second kill.
func TestJobLawsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	for n := range 24 {
		steps := 1 + r.IntN(4)
		var b strings.Builder
		for i := range steps {
			fmt.Fprintf(&b, "echo %d; cat f%d\n", i, i)
		}
		fate := r.IntN(3)  // 0: to the end; 1: killed; 2: refused
		k := -1            // the refused step's index (echo i is 2i, cat fi is 2i+1)
		p := r.IntN(steps) // killed: while cat fp waits
		if fate == 2 {
			k = r.IntN(2 * steps)
		}
		dir := t.TempDir()
		for i := range steps {
			fifo(t, dir, fmt.Sprintf("f%d", i))
		}
		s := openLocal(t, dir, Config{Gatekeeper: &refuseStep{k: k}})
		ctx := context.Background()
		// Each step's pipe is opened once its cat waits on it, in order: up to the refused
		// step, or the killed one.
		released := make(chan struct{})
		go func() {
			defer close(released)
			for i := range steps {
				if fate == 1 && i == p || fate == 2 && 2*i+1 >= k {
					return
				}
				release(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), "")
			}
		}()
		res, err := s.Run(ctx, Call{Script: b.String(), Budget: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		j := s.Jobs()[0]
		if res.End.Kind == Detached {
			j, err = s.Job(res.End.Job)
			if err != nil {
				t.Fatal(err)
			}
		}
		if fate == 1 {
			// Killed once step p has printed and its cat waits on a pipe nobody opens.
			for !strings.HasSuffix(stdoutOf(j.Result()), fmt.Sprintf("%d\n", p)) {
				select {
				case <-j.Done():
					t.Fatalf("job %d ended before its kill: %s", n, j.Result())
				case <-time.After(5 * time.Millisecond):
				}
			}
			j.Kill()
			select {
			case <-j.Done():
			default:
				t.Fatalf("job %d: a kill did not end it at once", n)
			}
		}
		final, err := j.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		<-released
		printed := steps // the numbers the job printed
		switch fate {
		case 0:
			if final.End.Kind != Finished {
				t.Fatalf("job %d %q: end %+v, want finished", n, b.String(), final.End)
			}
		case 1:
			printed = p + 1
			if final.End.Kind != Killed {
				t.Fatalf("job %d: end %+v, want killed", n, final.End)
			}
		case 2:
			printed = (k + 1) / 2
			if final.End.Kind != Refused || final.End.Step != k {
				t.Fatalf("job %d %q: end %+v, want refused at %d", n, b.String(), final.End, k)
			}
		}
		var want strings.Builder
		for i := range printed {
			fmt.Fprintf(&want, "%d\n", i)
		}
		if got := stdoutOf(final); got != want.String() {
			t.Fatalf("job %d (fate %d, k %d, p %d): printed %q, want %q", n, fate, k, p, got, want.String())
		}
		// The end is final: after every goroutine of the call is done, and a second kill.
		j.Kill()
		s.wg.Wait()
		if again := j.Result(); again != final || fmt.Sprint(again.End) != fmt.Sprint(final.End) {
			t.Fatalf("job %d: the end changed: %+v, was %+v", n, again.End, final.End)
		}
		t.Logf("job %d: %d steps, fate %d (k %d, p %d): %s", n, steps, fate, k, p, final.End.Kind)
		s.Close()
	}
}

// stdoutOf is what a result's steps printed on their standard output, in order.
func stdoutOf(res *Result) string {
	var b strings.Builder
	for _, st := range res.Steps {
		b.WriteString(st.Stdout.Text)
	}
	return b.String()
}
