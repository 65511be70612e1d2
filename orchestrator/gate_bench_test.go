package orchestrator

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

var frameSizes = []int{1 << 10, 64 << 10, 4 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// benchFrames writes b.N copies of line into a pipe from another goroutine and runs read on
// the pipe's other end.
func benchFrames(b *testing.B, line []byte, read func(r io.Reader) error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer pw.Close()
		for i := 0; i < b.N; i++ {
			if _, err := pw.Write(line); err != nil {
				return
			}
		}
	}()
	if err := read(pr); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPipe is the peer: the same bytes through the same pipe, read and dropped.
func BenchmarkPipe(b *testing.B) {
	for _, n := range frameSizes {
		line := streamLine(n)
		b.Run(sizeName(n), func(b *testing.B) {
			benchFrames(b, line, func(r io.Reader) error {
				buf := make([]byte, 256<<10)
				for {
					if _, err := r.Read(buf); err == io.EOF {
						return nil
					} else if err != nil {
						return err
					}
				}
			})
		})
	}
}

// streamLine is a stream frame whose line is n bytes long.
func streamLine(n int) []byte {
	head := `{"event":"stream","id":"1","fd":1,"data":"`
	raw := (n - len(head) - 3) / 4 * 3
	data := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", raw)))
	line := head + data + `"}`
	line += strings.Repeat(" ", n-1-len(line)) + "\n"
	return []byte(line)
}

// idAt is where hostRequestLine's id digits are.
const idAt = len(`{"event":"host_request","id":"`)

// hostRequestLine is a host request whose line is n bytes long, its id ten zeros at idAt.
func hostRequestLine(n int) []byte {
	head := `{"event":"host_request","id":"0000000000","type":"fs.write","body":{"data":"`
	line := head + strings.Repeat("x", n-len(head)-4) + `"}}`
	return []byte(line + "\n")
}

// BenchmarkGateStream: stream frames through the gate to their exec's output, decoded.
func BenchmarkGateStream(b *testing.B) {
	for _, n := range frameSizes {
		line := streamLine(n)
		b.Run(sizeName(n), func(b *testing.B) {
			benchFrames(b, line, func(r io.Reader) error {
				c := &conn{pending: map[string]*call{"1": {stream: func(int, int, []byte) {}}}}
				g := &Gate{Route: c.route, Reply: func(*wire.Frame) error { return nil }}
				return g.Run(context.Background(), wire.NewReader(r))
			})
		})
	}
}

// BenchmarkGateHostRequest: host requests admitted, each handled and answered, every id
// fresh, sent as a kernel's relay sends them: at most wire.MaxHostRequests waiting for their
// replies at once (a program asks, then waits). refused/op counts the busy refusals, which a
// kernel keeping that bound never gets.
func BenchmarkGateHostRequest(b *testing.B) {
	for _, n := range frameSizes {
		b.Run(sizeName(n), func(b *testing.B) { benchHostRequests(b, n, wire.MaxHostRequests) })
	}
}

// BenchmarkGateHostRequestFlood: the same from a kernel that never waits for a reply, as a
// hostile one may: past the gate's bounds requests are refused busy (refused/op), and the
// reader is never held.
func BenchmarkGateHostRequestFlood(b *testing.B) {
	for _, n := range frameSizes {
		b.Run(sizeName(n), func(b *testing.B) { benchHostRequests(b, n, 0) })
	}
}

// benchHostRequests writes b.N host requests of n bytes, at most window unanswered at once
// (0: no bound), through a pipe into a gate.
func benchHostRequests(b *testing.B, n, window int) {
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	var slots chan struct{}
	if window > 0 {
		slots = make(chan struct{}, window)
	}
	line := hostRequestLine(n)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() { // each frame gets a fresh id, written in place
		defer pw.Close()
		for i := 0; i < b.N; i++ {
			if slots != nil {
				slots <- struct{}{}
			}
			for j, k := idAt+9, i; j >= idAt; j, k = j-1, k/10 {
				line[j] = byte('0' + k%10)
			}
			if _, err := pw.Write(line); err != nil {
				return
			}
		}
	}()
	var refused atomic.Int64
	g := &Gate{
		Handlers: map[string]Handler{"fs.write": func(context.Context, HostRequest) (any, error) { return nil, nil }},
		Reply: func(f *wire.Frame) error {
			if f.Status != wire.StatusOK {
				refused.Add(1)
			}
			if slots != nil {
				<-slots
			}
			return nil
		},
	}
	if err := g.Run(context.Background(), wire.NewReader(pr)); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
}
