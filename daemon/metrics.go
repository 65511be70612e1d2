package daemon

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// metrics are the daemon's counters, written in the Prometheus text format (version 0.0.4).
type metrics struct {
	mu          sync.Mutex
	open        int              // guarded by mu: sessions open now
	opened      int64            // guarded by mu
	closed      int64            // guarded by mu
	steps       map[string]int64 // guarded by mu: steps by verdict (ran, denied, unanswered, …)
	questions   int64            // guarded by mu
	answers     map[string]int64 // guarded by mu: settlements by outcome
	jobs        map[string]int64 // guarded by mu: job ends by kind
	detached    int64            // guarded by mu
	callSeconds histogram        // guarded by mu
	clone       histogram        // guarded by mu
	handback    histogram        // guarded by mu
	connections map[string]int64 // guarded by mu: connections through sessions' proxies, by verdict/decided_by
	netSent     int64            // guarded by mu: bytes sandboxes sent through their proxies
	netReceived int64            // guarded by mu: bytes sandboxes received through them
}

func newMetrics() *metrics {
	return &metrics{steps: map[string]int64{}, answers: map[string]int64{}, jobs: map[string]int64{},
		connections: map[string]int64{}, callSeconds: newHistogram(), clone: newHistogram(), handback: newHistogram()}
}

// histogram counts observations in fixed buckets of seconds.
type histogram struct {
	bounds []float64
	counts []int64 // per bound, not cumulative
	sum    float64
	n      int64
}

func newHistogram() histogram {
	b := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	return histogram{bounds: b, counts: make([]int64, len(b))}
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	h.sum += s
	h.n++
	for i, b := range h.bounds {
		if s <= b {
			h.counts[i]++
			return
		}
	}
}

func (m *metrics) add(f func(m *metrics)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// write writes every metric.
func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	labelled := func(name, help, label string, vs map[string]int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for _, k := range slices.Sorted(maps.Keys(vs)) {
			fmt.Fprintf(w, "%s{%s=%q} %d\n", name, label, k, vs[k])
		}
	}
	hist := func(name, help string, h *histogram) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
		var cum int64
		for i, b := range h.bounds {
			cum += h.counts[i]
			fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, b, cum)
		}
		fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, h.n, name, h.sum, name, h.n)
	}
	gauge("paddock_sessions_open", "Sessions open now.", float64(m.open))
	counter("paddock_sessions_opened_total", "Sessions opened.", m.opened)
	counter("paddock_sessions_closed_total", "Sessions closed.", m.closed)
	labelled("paddock_steps_total", "Shell steps by verdict: ran, or the code of a refusal.", "verdict", m.steps)
	counter("paddock_questions_total", "Questions shown to clients.", m.questions)
	labelled("paddock_answers_total", "Questions settled, by outcome.", "outcome", m.answers)
	counter("paddock_jobs_detached_total", "Calls that passed their blocking budget and went on as jobs.", m.detached)
	labelled("paddock_jobs_ended_total", "Jobs ended, by how.", "end", m.jobs)
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", "paddock_egress_connections_total",
		"Connections through the sessions' proxies, by verdict and by what decided it.", "paddock_egress_connections_total")
	for _, k := range slices.Sorted(maps.Keys(m.connections)) {
		verdict, by, _ := strings.Cut(k, "/")
		fmt.Fprintf(w, "paddock_egress_connections_total{verdict=%q,decided_by=%q} %d\n", verdict, by, m.connections[k])
	}
	counter("paddock_egress_sent_bytes_total", "Bytes sandboxes sent through their proxies.", m.netSent)
	counter("paddock_egress_received_bytes_total", "Bytes sandboxes received through their proxies.", m.netReceived)
	hist("paddock_call_seconds", "Time a bash call took to answer (its end, or detached).", &m.callSeconds)
	hist("paddock_clone_seconds", "Time to make an isolated child's workspace.", &m.clone)
	hist("paddock_handback_seconds", "Time to close an isolated child and hand its workspace back.", &m.handback)
}
