//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The mend for a runtime that refuses AT_NO_AUTOMOUNT. Debian's runsc (gVisor 20221219)
// answers EINVAL to statx and newfstatat when that flag is set, and coreutils' ls and stat
// set it on every named path: `ls sub` fails with "Invalid argument". A system-call filter
// alone cannot mend it: refusing statx with ENOSYS makes glibc fall back on newfstatat with
// the same flag, which fails the same way, and a filter cannot change a call's arguments.
// gVisor's version has no SECCOMP_RET_USER_NOTIF either. What is left is a tracer: under
// such a runtime the kernel starts each command through `paddock-kernel automount`, which
// puts on it a filter that stops those two calls, when they carry the flag, for the tracer
// (SECCOMP_RET_TRACE), which clears the flag (a no-op there: gVisor mounts nothing on
// access) and lets the call go on. Every other call runs untraced.
//
// What a traced command loses: a tracer of its own (strace, gdb: a process has one), the
// mend for what it leaves running once it ends (detached when its tracer exits), stopping
// on a stop signal (SIGSTOP, SIGTSTP: see trace), and, when it cannot be started at all,
// the kernel's own report of why: the tracer prints it on standard error and exits 126 or
// 127, as a shell does.

// automountRefused reports whether this machine refuses AT_NO_AUTOMOUNT in statx or
// newfstatat while it takes the same call without the flag: then, where the tracer can mend
// it, commands are started through it.
func automountRefused() bool {
	if !automountMendable {
		return false
	}
	const mask = unix.STATX_TYPE | unix.STATX_MODE
	var stx unix.Statx_t
	var st unix.Stat_t
	statx := func(flags int) error { return unix.Statx(unix.AT_FDCWD, "/", flags, mask, &stx) }
	fstatat := func(flags int) error { return unix.Fstatat(unix.AT_FDCWD, "/", &st, flags) }
	refused := func(call func(int) error) bool {
		return call(0) == nil && errors.Is(call(unix.AT_NO_AUTOMOUNT), unix.EINVAL)
	}
	return refused(statx) || refused(fstatat)
}

// automountFilter is the filter a traced command runs under: statx or newfstatat of this
// architecture, with AT_NO_AUTOMOUNT in its flags (a low-word bit: the kernel reads an int),
// stops for the tracer; every other call is allowed (the kernel's set-id filter, beneath,
// still judges them).
func automountFilter() []bpf.Instruction {
	const offNr, offArch, offArgs = 0, 4, 16
	trace := bpf.RetConstant{Val: unix.SECCOMP_RET_TRACE}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: automountArch, SkipFalse: 8}, // to allow
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: sysStatx, SkipFalse: 2},
		bpf.LoadAbsolute{Off: offArgs + 8*statxFlags, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.AT_NO_AUTOMOUNT, SkipTrue: 3, SkipFalse: 4}, // trace, allow
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: sysNewfstatat, SkipFalse: 3},                       // to allow
		bpf.LoadAbsolute{Off: offArgs + 8*newfstatatFlags, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.AT_NO_AUTOMOUNT, SkipFalse: 1},
		trace,
		allow,
	}
}

// Automount runs the program at path with argv as its tracer, clearing AT_NO_AUTOMOUNT from
// the calls the filter stops, in it and in every process it starts; it returns when the
// program ends, with its status (a death by a signal is died again). It is
// `paddock-kernel automount PATH ARGV...`, which the kernel starts in the command's place:
// the program gets the tracer's descriptors, environment, directory and process group.
func Automount(path string, argv []string) int {
	if !automountMendable {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount: not on", runtime.GOARCH)
		return codeNotExecutable
	}
	// The tracer outlives every signal the command's process group gets, so that it reports
	// the command's own end: caught here, each is the default again in the program.
	signal.Notify(make(chan os.Signal, 1))
	files, err := ownFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount:", err)
		return codeNotExecutable
	}
	raw, err := bpf.Assemble(automountFilter())
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount:", err)
		return codeNotExecutable
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	// Ptrace requests come from the thread the program was started by (its tracer).
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount: no_new_privs:", err)
		return codeNotExecutable
	}
	// On the tracer itself: the program inherits it. The tracer's own calls never carry
	// the flag (Go's stat does not set it).
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount: filter:", e)
		return codeNotExecutable
	}
	runtime.KeepAlive(prog)
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: files, Sys: &syscall.SysProcAttr{Ptrace: true}}
	pid, err := syscall.ForkExec(path, argv, attr)
	if errors.Is(err, syscall.ENOEXEC) {
		// A file with no #! line is a shell script, as execvp (and the kernel) runs it.
		sh := "/bin/sh"
		if p, ns := lookPath("sh", os.Getenv("PATH"), "", true); ns == nil {
			sh = p
		}
		pid, err = syscall.ForkExec(sh, append([]string{"sh", path}, argv[1:]...), attr)
	}
	if err != nil {
		st := startFailure(argv[0], err)
		fmt.Fprintln(os.Stderr, st.Error)
		return st.Code
	}
	// The tracer may set the registers of every process it traces, the kernel's shell among
	// them, which makes itself undumpable so that no process of the sandbox steers it: no
	// process of the sandbox may steer the tracer either. Not before the program started:
	// gVisor refuses PTRACE_TRACEME to a child that is undumpable, as a fork of an
	// undumpable tracer is until it execs.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	return trace(pid)
}

// trace serves the program pid, stopped at its exec, and every process and thread it
// starts, until pid ends; it returns pid's exit code, or dies of the signal pid died of.
func trace(pid int) int {
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount: the program did not stop at its start:", err)
		return codeNotExecutable
	}
	const opts = unix.PTRACE_O_TRACESECCOMP | unix.PTRACE_O_TRACEEXEC |
		unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACECLONE
	if err := unix.PtraceSetOptions(pid, opts); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		fmt.Fprintln(os.Stderr, "paddock-kernel: automount: trace:", err)
		return codeNotExecutable
	}
	unix.PtraceCont(pid, 0)
	// known are the traced tasks seen: a task the tracer has not seen yet starts with a
	// SIGSTOP of the tracing's own, which is not delivered.
	known := map[int]bool{pid: true}
	for {
		wpid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "paddock-kernel: automount: wait:", err)
			return codeNotExecutable
		}
		switch {
		case ws.Exited(), ws.Signaled():
			delete(known, wpid)
			if wpid != pid {
				continue
			}
			if ws.Signaled() {
				dieOf(ws.Signal())
			}
			return ws.ExitStatus()
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == unix.SIGTRAP && ws.TrapCause() == unix.PTRACE_EVENT_SECCOMP:
			// The flag is cleared; a task that vanished meanwhile has nothing to mend.
			clearAutomount(wpid)
			sig = 0
		case sig == unix.SIGTRAP && ws.TrapCause() > 0:
			// fork, vfork, clone or exec: an event of the tracing, not a signal.
			sig = 0
		case sig == unix.SIGSTOP && !known[wpid]:
			sig = 0
		case stopping(sig) && groupStop(wpid):
			// The task stopped, its stop signal delivered: a tracer attached by
			// PTRACE_TRACEME (the one Go starts a program with) cannot hold it stopped and
			// still hear SIGCONT, so it goes on; a stop signal does not stop it.
			sig = 0
		}
		known[wpid] = true
		unix.PtraceCont(wpid, int(sig))
	}
}

// stopping reports whether sig's default action stops a process.
func stopping(sig syscall.Signal) bool {
	return sig == unix.SIGSTOP || sig == unix.SIGTSTP || sig == unix.SIGTTIN || sig == unix.SIGTTOU
}

// groupStop reports whether task tid is in a group-stop, rather than stopped with a signal
// about to be delivered: only the latter has a siginfo (PTRACE_GETSIGINFO: EINVAL).
func groupStop(tid int) bool {
	var si [128]byte
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(&si)), 0, 0)
	return e == unix.EINVAL
}

// ownFiles are the descriptors the tracer was given (open across exec), each to be the
// program's at the same number (its standard streams, its redirections, the kernel's
// shell's channel); a gap is closed in the program.
func ownFiles() ([]uintptr, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	dirFD := int(d.Fd())
	d.Close()
	if err != nil {
		return nil, err
	}
	open := map[int]bool{}
	top := -1
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd == dirFD {
			continue
		}
		// What the kernel gave the tracer is open across exec; what is closed on exec is the
		// tracer's own (the Go runtime's poller and eventfd, its cgroup files), which the
		// program must not get, or one closed since.
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		open[fd] = true
		top = max(top, fd)
	}
	files := make([]uintptr, max(top+1, 3))
	for i := range files {
		files[i] = ^uintptr(0)
		if open[i] {
			files[i] = uintptr(i)
		}
	}
	return files, nil
}

// dieOf ends the tracer by sig, as its program ended, so that whoever waits for it sees
// the same death: the signal's action is made the default (the Go runtime catches some),
// the signal sent, and the tracer waits for it (gVisor delivers a signal a process sends
// itself later than the call's return). A signal whose default is not to end a process
// (which the program cannot have died of) ends the tracer as a shell reports such a death.
func dieOf(sig syscall.Signal) {
	switch sig {
	case unix.SIGCHLD, unix.SIGURG, unix.SIGWINCH, unix.SIGCONT, unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		os.Exit(128 + int(sig))
	}
	signal.Reset()
	var dfl [4]uint64 // a kernel sigaction of SIG_DFL: handler, flags, restorer, mask all zero
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	unix.Kill(os.Getpid(), sig)
	var none uint64 // no signal blocked while waiting
	for {
		unix.RawSyscall(unix.SYS_RT_SIGSUSPEND, uintptr(unsafe.Pointer(&none)), 8, 0)
	}
}
