//go:build linux

package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/wire"
)

// streamBuffer is the most one stream frame carries: one read of an output pipe.
const streamBuffer = 32 << 10

// execution is one exec request, from its arrival to its reply.
type execution struct {
	id      string
	req     wire.Exec
	once    sync.Once
	started chan struct{} // closed once every command has started or failed to
	pgid    int           // the pipeline's process group, 0 when nothing started; set before started closes
	done    chan struct{} // closed when every process has ended and every stream is drained
	judges  *judges       // a script, or a judged exec: its shells' judges; else nil
}

func newExecution(id string, req wire.Exec) *execution {
	return &execution{id: id, req: req, started: make(chan struct{}), done: make(chan struct{})}
}

// markStarted records the process group and lets signals through; only the first call counts.
func (e *execution) markStarted(pgid int) {
	e.once.Do(func() {
		e.pgid = pgid
		close(e.started)
	})
}

// streamKey names an output stream of an exec: the command's index and 1 or 2. The zero
// key is no stream.
type streamKey struct{ step, fd int }

// slot is what one descriptor of a command becomes: a descriptor the kernel holds open, or
// an output stream whose pipe is made once the redirections are known.
type slot struct {
	fd     int       // -1: closed
	stream streamKey // set: this descriptor is that stream's pipe
}

// command is one command of a pipeline, ready to start.
type command struct {
	slots []slot
	path  string   // the program
	argv  []string // its arguments, argv[0] first
	env   []string
	skip  bool               // it does not run; its status is already set
	shell *script.Invocation // a shell reading a script, which the kernel interprets
}

// fdSet is the child-side descriptors of a pipeline, which the kernel closes once the
// children hold their copies.
type fdSet []int

func (s *fdSet) add(fds ...int) { *s = append(*s, fds...) }

func (s *fdSet) closeAll() {
	for _, fd := range *s {
		syscall.Close(fd)
	}
	*s = nil
}

// run runs one pipeline and gives every command's status, after every stream frame of
// it has been written.
func (s *server) run(e *execution) (*wire.ExecResult, error) {
	x := &e.req
	var scriptShell *script.Invocation
	cwd, err := execDir(x.Cwd)
	if err != nil {
		return nil, err
	}
	commands := x.Commands
	if x.Script != "" {
		// A script is one command: the kernel's shell, reading it.
		params := x.Params
		if len(params) == 0 {
			params = []string{"bash"}
		}
		commands = []wire.Command{{Argv: []string{"bash", "-c", x.Script}}}
		scriptShell = &script.Invocation{Source: x.Script, Params: params}
	}
	n := len(commands)
	statuses := make([]wire.ExitStatus, n)
	var fds fdSet // the children's ends; closed once they are started
	defer fds.closeAll()
	streams := make(map[streamKey]*os.File) // the kernel's ends, closed by their pumps
	pumping := false
	defer func() {
		if !pumping {
			for _, f := range streams {
				f.Close()
			}
		}
	}()

	devnull, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errorf(CodeIO, "exec: open %s: %v", os.DevNull, err)
	}
	fds.add(devnull)

	// The pipes between commands, and each command's descriptors before its redirections.
	cmds := make([]*command, n)
	in := devnull
	for i := range cmds {
		out := slot{fd: -1, stream: streamKey{n - 1, 1}}
		next := -1
		if i < n-1 {
			var p [2]int
			if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
				return nil, errorf(CodeIO, "exec: pipe: %v", err)
			}
			fds.add(p[0], p[1])
			out, next = slot{fd: p[1]}, p[0]
		}
		cmds[i] = &command{slots: []slot{{fd: in}, out, {fd: -1, stream: streamKey{i, 2}}}}
		in = next
	}

	// Redirections, in order. One that fails keeps its command from running, as in a shell.
	for i, c := range cmds {
		if err := openRedirects(c, commands[i].Redirects, cwd, &fds, msgPrefix(x)); err != nil {
			statuses[i] = wire.ExitStatus{Code: codeRedirect}
			c.skip = true
			s.complain(e.id, c, err.Error())
		}
	}

	// The output streams that commands which run still write to.
	writeEnd := make(map[streamKey]int)
	for _, c := range cmds {
		if c.skip {
			continue
		}
		for j := range c.slots {
			k := c.slots[j].stream
			if k == (streamKey{}) {
				continue
			}
			w, ok := writeEnd[k]
			if !ok {
				var p [2]int
				if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
					return nil, errorf(CodeIO, "exec: pipe: %v", err)
				}
				fds.add(p[1])
				// Non-blocking, so the read end joins the runtime's poller.
				syscall.SetNonblock(p[0], true)
				streams[k] = os.NewFile(uintptr(p[0]), "stream")
				writeEnd[k], w = p[1], p[1]
			}
			c.slots[j].fd = w
		}
	}

	// The programs.
	for i, c := range cmds {
		if c.skip {
			continue
		}
		cmd := &commands[i]
		c.env = mergeEnv(x.Env, cmd.Env, s.ownEnv())
		pathEnv, hasPath := lookupEnv(c.env, "PATH")
		c.argv = cmd.Argv
		name := c.argv[0]
		if x.Shell {
			name = "bash"
			if _, ns := lookPath(name, pathEnv, cwd, hasPath); ns != nil {
				name = "sh"
			}
			c.argv = append([]string{name, "-c"}, cmd.Argv...)
		}
		if scriptShell != nil {
			c.shell = scriptShell
		} else if x.Judged && !x.Shell {
			getenv := func(k string) string { v, _ := lookupEnv(c.env, k); return v }
			if inv, ok := script.Shell(c.argv, getenv); ok {
				c.shell = &inv
			}
		}
		if c.shell != nil {
			// The kernel's shell runs in its place (shell.go), its commands judged.
			// Its channel is the first descriptor past the command's own.
			c.path, c.argv = s.self, []string{"paddock-kernel", "shell", strconv.Itoa(max(len(c.slots), 3))}
			continue
		}
		path, ns := lookPath(name, pathEnv, cwd, hasPath)
		if ns != nil {
			statuses[i] = wire.ExitStatus{Code: ns.code, Error: ns.msg}
			c.skip = true
			continue
		}
		c.path = path
	}

	// The processes, all in the process group of the first one started.
	waits := make([]<-chan syscall.WaitStatus, n)
	s.reaper.begin()
	if s.isClosing() {
		s.reaper.end()
		return nil, errorf(CodeIO, "the kernel is shutting down")
	}
	leader := 0
	for i, c := range cmds {
		if c.skip {
			continue
		}
		files := make([]uintptr, len(c.slots))
		for j, sl := range c.slots {
			files[j] = uintptr(sl.fd) // -1 closes it in the child
		}
		var channel *shellConn
		if c.shell != nil {
			child, kc, err := shellChannel()
			if err != nil {
				statuses[i] = wire.ExitStatus{Code: codeNotExecutable, Error: "paddock-kernel: shell: " + err.Error()}
				continue
			}
			fds.add(child)
			for len(files) < max(len(c.slots), 3) {
				files = append(files, ^uintptr(0))
			}
			files = append(files, uintptr(child))
			channel = kc
		}
		attr := &syscall.ProcAttr{
			Dir:   cwd,
			Env:   c.env,
			Files: files,
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pgid: leader},
		}
		path, argv := c.path, c.argv
		if s.automount {
			path, argv = s.self, append([]string{"paddock-kernel", "automount", path}, argv...)
		}
		pid, ch, err := s.reaper.forkExec(path, argv, attr)
		if errors.Is(err, syscall.ENOEXEC) {
			// A file with no #! line is a shell script, as execvp runs it.
			pathEnv, hasPath := lookupEnv(c.env, "PATH")
			sh, ns := lookPath("sh", pathEnv, cwd, hasPath)
			if ns != nil {
				sh = "/bin/sh"
			}
			pid, ch, err = s.reaper.forkExec(sh, append([]string{"sh", c.path}, c.argv[1:]...), attr)
		}
		if err != nil {
			if channel != nil {
				channel.c.Close()
			}
			statuses[i] = startFailure(c.argv[0], err)
			continue
		}
		if channel != nil {
			s.handlers.Add(1)
			go func() {
				defer s.handlers.Done()
				e.judges.serve(channel, *c.shell)
			}()
		}
		if leader == 0 {
			leader = pid
			s.track(pid)
		}
		waits[i] = ch
	}
	s.reaper.end()
	fds.closeAll()
	e.markStarted(leader)

	var pumps sync.WaitGroup
	for k, f := range streams {
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			s.pump(e.id, k, f)
		}()
	}
	pumping = true
	for i, ch := range waits {
		if ch != nil {
			statuses[i] = exitStatus(<-ch)
		}
	}
	pumps.Wait()
	return &wire.ExecResult{Statuses: statuses}, nil
}

// pump sends what a stream's pipe yields, a frame per read, until every writer has closed it.
func (s *server) pump(id string, k streamKey, f *os.File) {
	defer f.Close()
	buf := make([]byte, streamBuffer)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			// A failed write means the host is gone; reading on keeps the writers from
			// blocking until the kernel has stopped them.
			s.out.write(&wire.Frame{Event: wire.EventStream, ID: id, Step: k.step, FD: k.fd, Data: buf[:n]})
		}
		if err != nil {
			return
		}
	}
}

// complain writes why a command did not run where its standard error goes at that point:
// its stream, a file, or a pipe.
func (s *server) complain(id string, c *command, msg string) {
	b := []byte(msg + "\n")
	sl := c.slots[2]
	switch {
	case sl.stream != (streamKey{}):
		s.out.write(&wire.Frame{Event: wire.EventStream, ID: id, Step: sl.stream.step, FD: sl.stream.fd, Data: b})
	case sl.fd >= 0:
		// A fresh pipe or a file: a line this short does not block.
		syscall.Write(sl.fd, b)
	}
}

// execDir is the directory an exec runs in: cwd, relative to the kernel's own, which "" means.
func execDir(cwd string) (string, error) {
	if cwd == "" {
		cwd = "."
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", errorf(CodeIO, "exec: cwd %s: %v", cwd, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		we := classify(err)
		we.Message = "exec: cwd: " + we.Message
		return "", we
	case !fi.IsDir():
		return "", errorf(CodeBadRequest, "exec: cwd %s is not a directory", cwd)
	}
	return abs, nil
}

// startFailure is the status of a command whose program was found but could not be run.
func startFailure(name string, err error) wire.ExitStatus {
	code := codeNotExecutable
	if errors.Is(err, syscall.ENOENT) {
		// bash: "cannot execute: required file not found" (a missing #! interpreter).
		code = codeNotFound
	}
	return wire.ExitStatus{Code: code, Error: "paddock-kernel: " + name + ": " + errText(err)}
}

// openRedirects applies a command's redirections to its descriptors, opening files as it
// goes. The error is the text a shell prints.
func openRedirects(c *command, rs []wire.Redirect, cwd string, fds *fdSet, prefix string) error {
	for _, r := range rs {
		for len(c.slots) <= max(r.FD, r.DupFD) {
			c.slots = append(c.slots, slot{fd: -1})
		}
		if r.Op == wire.RedirDup {
			src := c.slots[r.DupFD]
			if src.fd < 0 && src.stream == (streamKey{}) {
				return errors.New(prefix + strconv.Itoa(r.DupFD) + ": Bad file descriptor")
			}
			c.slots[r.FD] = src
			continue
		}
		flags := syscall.O_RDONLY
		switch r.Op {
		case wire.RedirOut:
			flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC
		case wire.RedirAppend:
			flags = syscall.O_WRONLY | syscall.O_CREAT | syscall.O_APPEND
		}
		p := r.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		fd, err := openFile(p, flags|syscall.O_CLOEXEC, 0o666)
		if err != nil {
			return errors.New(prefix + r.Path + ": " + errText(err))
		}
		fds.add(fd)
		c.slots[r.FD] = slot{fd: fd}
	}
	return nil
}

// openFile opens a redirection's file, again when a signal interrupts the open.
func openFile(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := syscall.Open(path, flags, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// msgPrefix begins the kernel's own messages on a command's standard error.
func msgPrefix(x *wire.Exec) string {
	if x.Prefix != "" {
		return x.Prefix
	}
	return "paddock-kernel: "
}
