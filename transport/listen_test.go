package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// A kernel's resume frame is read as the sandbox wrote it: anything but a well-formed one is
// a protocol fault, and one that is accepted keeps its promises (no more replayed frames
// than were numbered, exec ids present and distinct, skipped counts not negative).
func FuzzParseResume(f *testing.F) {
	f.Add([]byte(`{"event":"resume","body":{"last":10,"replay":3,"execs":[{"id":"r1-4","running":true,"skipped":12}]}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":0,"replay":0}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":1,"replay":2}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":5,"replay":1,"execs":[{"id":"a"},{"id":"a"}]}}`))
	f.Add([]byte(`{"event":"reply","id":"1","status":"ok"}`))
	f.Add([]byte(`{"event":"resume","body":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		res, err := ParseResume(line)
		if err != nil {
			if _, ok := err.(*wire.ProtocolFault); !ok {
				t.Fatalf("%q: %T %v, not a protocol fault", line, err, err)
			}
			return
		}
		if res.Replay < 0 || uint64(res.Replay) > res.Last {
			t.Fatalf("%q: accepted %+v", line, res)
		}
		seen := map[string]bool{}
		for _, x := range res.Execs {
			if x.ID == "" || seen[x.ID] || x.Skipped < 0 {
				t.Fatalf("%q: accepted %+v", line, res)
			}
			seen[x.ID] = true
		}
		var f wire.Frame
		if json.Unmarshal(line, &f) != nil || f.Event != wire.EventResume {
			t.Fatalf("%q: accepted, but it is no resume frame", line)
		}
	})
}

// The listening directory is the sandbox's to write. A symlink planted where the kernel's
// socket is looked for is not followed (the host never connects to a socket of its own
// choosing), and one planted where the key is written is replaced, the file it names
// untouched.
func TestListenDirPlantedSymlinks(t *testing.T) {
	host := t.TempDir()
	victim := filepath.Join(host, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	other := filepath.Join(host, "other.sock")
	l, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Errorf("the host connected through a planted symlink")
			c.Close()
		}
	}()

	dir := filepath.Join(t.TempDir(), "kernel")
	os.MkdirAll(dir, 0o700)
	os.Symlink(victim, filepath.Join(dir, ListenKey))
	if err := PrepareListen(Spec{Listen: dir, Key: "k"}, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the planted key symlink was followed: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ListenKey)); err != nil || string(b) != "k" {
		t.Errorf("the key file: %q %v", b, err)
	}

	os.Symlink(other, filepath.Join(dir, ListenSocket))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Attach(ctx, dir, "k", nil); err == nil {
		t.Fatal("attached through a planted symlink")
	}
}

// A program in the sandbox can put a socket of its own where the kernel listens. The host
// attaching to it sends no key: the impostor gets a nonce, answers with a challenge it
// cannot prove (it has not the key), and is refused with a protocol fault; whatever it
// answers, it never learns the key (nor a proof it could attach with, which would be over
// the host's nonce and a kernel's) and gets no prove frame.
func TestAttachImpostorLearnsNoKey(t *testing.T) {
	const key = "the-hosts-secret-key"
	for _, answer := range []func(hostNonce string) string{
		func(string) string { // a made-up proof
			return wire.Proof("a guess", wire.ProofKernel, wire.NewNonce(), wire.NewNonce())
		},
		func(hn string) string { return wire.Proof("", wire.ProofKernel, hn, hn) }, // the empty key
		func(hn string) string { return "" },
	} {
		dir := t.TempDir()
		l, err := net.Listen("unix", filepath.Join(dir, ListenSocket))
		if err != nil {
			t.Fatal(err)
		}
		heard := make(chan []byte, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				heard <- nil
				return
			}
			defer c.Close()
			r := wire.NewReader(c)
			line, err := r.Next()
			if err != nil {
				heard <- nil
				return
			}
			var f wire.Frame
			var a wire.Attach
			json.Unmarshal(line.Bytes, &f)
			json.Unmarshal(f.Body, &a)
			all := append([]byte(nil), line.Bytes...)
			line.Release()
			body, _ := json.Marshal(wire.Challenge{Nonce: a.Nonce, Proof: answer(a.Nonce)})
			wire.NewWriter(c).Write(&wire.Frame{Event: wire.EventChallenge, Body: body})
			c.SetReadDeadline(time.Now().Add(time.Second))
			if more, err := r.Next(); err == nil { // the host must hang up, not prove
				all = append(all, more.Bytes...)
			}
			heard <- all
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = Attach(ctx, dir, key, nil)
		cancel()
		l.Close()
		if _, ok := err.(*wire.ProtocolFault); !ok {
			t.Fatalf("attached to an impostor, or not refused as one: %T %v", err, err)
		}
		got := <-heard
		if bytes.Contains(got, []byte(key)) || bytes.Contains(got, []byte(wire.EventProve)) {
			t.Fatalf("the impostor heard %q", got)
		}
	}
}

// A kernel's challenge is read as the sandbox wrote it: anything but a well-formed one is a
// protocol fault.
func FuzzParseChallenge(f *testing.F) {
	n := wire.NewNonce()
	f.Add([]byte(`{"event":"challenge","body":{"nonce":"` + n + `","proof":"ab"}}`))
	f.Add([]byte(`{"event":"challenge","body":{"nonce":"zz"}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":0,"replay":0}}`))
	f.Add([]byte(`{"event":"challenge","body":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ch, err := ParseChallenge(line)
		if err != nil {
			if _, ok := err.(*wire.ProtocolFault); !ok {
				t.Fatalf("%q: %T %v, not a protocol fault", line, err, err)
			}
			return
		}
		var f wire.Frame
		if json.Unmarshal(line, &f) != nil || f.Event != wire.EventChallenge || !wire.ValidNonce(ch.Nonce) {
			t.Fatalf("%q: accepted %+v", line, ch)
		}
	})
}
