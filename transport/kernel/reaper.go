//go:build linux

package kernel

import (
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// reaper waits for every child of the kernel: the processes it starts and, as a child
// subreaper, every orphan of their trees that the system hands back to it. One loop reaps
// them all with wait4(-1) on SIGCHLD and hands each started process's status to its waiter;
// an orphan's status is dropped.
//
// Starting holds the start lock shared and reaping holds it exclusively, so no child is
// reaped while a pipeline is being started: a pipeline's first process stays in the process
// table (a zombie at worst) until the last one has joined its process group, and a pid is
// registered before its status can be read.
type reaper struct {
	startMu sync.RWMutex

	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus // guarded by mu

	sigchld chan os.Signal
	stop    chan struct{}
	done    chan struct{}
}

// newReaper starts the reaping loop; close stops it.
func newReaper() *reaper {
	r := &reaper{
		waiters: make(map[int]chan syscall.WaitStatus),
		sigchld: make(chan os.Signal, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	signal.Notify(r.sigchld, syscall.SIGCHLD)
	go r.loop()
	return r
}

func (r *reaper) loop() {
	defer close(r.done)
	for {
		r.reapAll()
		select {
		case <-r.sigchld:
		case <-r.stop:
			r.reapAll()
			return
		}
	}
}

// reapAll reaps every child that has ended.
func (r *reaper) reapAll() {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- ws // buffered: never blocks
		}
	}
}

// close stops the loop after one last reaping.
func (r *reaper) close() {
	signal.Stop(r.sigchld)
	close(r.stop)
	<-r.done
}

// begin starts a batch of starts: until end, no child is reaped.
func (r *reaper) begin() { r.startMu.RLock() }

// end ends a batch of starts.
func (r *reaper) end() { r.startMu.RUnlock() }

// forkExec starts a process; it must be called between begin and end. The channel gets the
// process's wait status once.
func (r *reaper) forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	pid, err := syscall.ForkExec(argv0, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.mu.Lock()
	r.waiters[pid] = ch
	r.mu.Unlock()
	return pid, ch, nil
}

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid, pgid int
	zombie          bool
}

// descendants lists every process whose parent chain leads to pid, zombies included. ok is
// false when /proc cannot be read.
func descendants(pid int) (procs []proc, ok bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, false
	}
	all := make(map[int]proc, len(names))
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pr, ok := readProc(p); ok {
			all[p] = pr
		}
	}
	for _, p := range all {
		// Climb the parent chain; the step bound guards against a chain read mid-change.
		for q, steps := p, 0; steps < len(all); steps++ {
			if q.ppid == pid {
				procs = append(procs, p)
				break
			}
			next, ok := all[q.ppid]
			if !ok || q.ppid <= 1 {
				break
			}
			q = next
		}
	}
	return procs, true
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	p, ok := parseStat(b)
	p.pid = pid
	return p, ok
}

// parseStat reads the state, parent and process group from a /proc/PID/stat line:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parentheses.
func parseStat(b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{ppid: ppid, pgid: pgid, zombie: string(f[0]) == "Z" || string(f[0]) == "X"}, true
}
