package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
)

// benchSession opens a docker session whose proxy allows the fixture's servers, in a
// workspace that holds the fixture's CA and the scripts the benchmarks run.
func benchSession(b *testing.B) (*orchestrator.Session, *netHost, string) {
	b.Helper()
	ensureHostImage(b, engine(b))
	ws, conf := b.TempDir(), b.TempDir()
	h := startNetHost(b, ws)
	settings := filepath.Join(conf, "settings.yaml")
	os.WriteFile(settings, []byte("kernelTransport:\n  kind: docker\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "connect.py"), []byte(connectLatency), 0o644)
	ctx := context.Background()
	l, err := session.Load(config.Options{Workspace: ws, GlobalFile: settings})
	if err != nil {
		b.Fatal(err)
	}
	s, p, err := session.Open(ctx, session.Options{Workspace: ws, Settings: l, Transport: session.Transport{AllowNet: []string{h.http, h.https, h.echo}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); p.Finish(ctx) })
	return s, h, ws
}

// BenchmarkEgressDownload: 200 MB fetched by curl in a docker sandbox through its kernel,
// the bound socket and the host's proxy, against the same curl on the host fetching it
// directly, alternated in one run: over plain HTTP (a request the proxy forwards) and
// HTTPS (a CONNECT tunnel). The ratio is the tunnel's throughput over the direct one's
// (goal ≥ 0.5).
func BenchmarkEgressDownload(b *testing.B) {
	const size = 200 << 20
	s, h, ws := benchSession(b)
	ctx := context.Background()
	for _, tc := range []struct{ name, url, flags string }{
		{"http", fmt.Sprintf("http://%s/big/%d", h.http, size), ""},
		{"https", fmt.Sprintf("https://%s/big/%d", h.https, size), " --cacert ca.pem"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			curl := "curl -sS -o /dev/null -w '%{size_download}'" + tc.flags + " " + tc.url
			var direct, tunnel time.Duration
			for range b.N {
				cmd := exec.Command("sh", "-c", curl)
				cmd.Dir, cmd.Env = ws, []string{"PATH=" + os.Getenv("PATH")} // no proxy variables
				t0 := time.Now()
				out, err := cmd.Output()
				direct += time.Since(t0)
				if err != nil || string(out) != strconv.Itoa(size) {
					b.Fatalf("direct: %q %v", out, err)
				}
				t0 = time.Now()
				r, err := s.Bash(ctx, curl)
				tunnel += time.Since(t0)
				if err != nil || r.End.Status != 0 || r.Steps[0].Stdout.Text != strconv.Itoa(size) {
					b.Fatalf("tunnel: %+v %v", r, err)
				}
			}
			mb := float64(size) / (1 << 20) * float64(b.N)
			b.ReportMetric(mb/direct.Seconds(), "direct-MiB/s")
			b.ReportMetric(mb/tunnel.Seconds(), "tunnel-MiB/s")
			b.ReportMetric(direct.Seconds()/tunnel.Seconds(), "ratio")
		})
	}
}

// BenchmarkEgressConnect: the latency a new allowed connection gains through the proxy. A
// program in a docker sandbox opens 200 connections one after another through the proxy
// (CONNECT, answered once the host has dialled the target); the same program on the host
// dials the target directly. The medians and their difference (goal: under 2 ms).
func BenchmarkEgressConnect(b *testing.B) {
	s, h, ws := benchSession(b)
	ctx := context.Background()
	var proxied, direct, added []float64
	b.ResetTimer()
	for range b.N {
		out, err := exec.Command("python3", filepath.Join(ws, "connect.py"), h.echo, "direct").Output()
		if err != nil {
			b.Fatalf("direct: %v", err)
		}
		d, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		r, err := s.Bash(ctx, "python3 connect.py "+h.echo+" proxy")
		if err != nil || r.End.Status != 0 {
			b.Fatalf("proxy: %+v %v", r, err)
		}
		p, _ := strconv.ParseFloat(strings.TrimSpace(r.Steps[0].Stdout.Text), 64)
		direct, proxied, added = append(direct, d), append(proxied, p), append(added, p-d)
	}
	b.ReportMetric(median(direct), "direct-p50-µs")
	b.ReportMetric(median(proxied), "proxy-p50-µs")
	b.ReportMetric(median(added), "added-p50-µs")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// connectLatency opens 200 connections to its target one after another, through the
// sandbox's proxy or directly, and prints the median time to a usable connection, in µs.
const connectLatency = `import socket, sys, time
target, how = sys.argv[1], sys.argv[2]
host, port = target.rsplit(":", 1)
times = []
for i in range(200):
    t0 = time.perf_counter()
    if how == "proxy":
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b:
                raise SystemExit("closed")
            head += b
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit(head)
    else:
        s = socket.create_connection((host, int(port)))
    times.append(time.perf_counter() - t0)
    s.close()
times.sort()
print(round(times[len(times) // 2] * 1e6, 1))
`
