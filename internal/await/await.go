// Package await is how tests wait for what they need to happen, on the event that says it
// did rather than on the clock: a process's end (a pidfd), a change in a directory
// (inotify, through fsnotify), and, for what no event announces, one bounded poll (Poll).
// Every wait ends with its context.
package await

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// Exit waits for process pid to end; a process that is gone already, or a zombie not yet
// reaped, has ended. It works for any process, the caller's child or not: the wait is a
// poll(2) on a pidfd, which becomes readable when the process exits.
func Exit(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer unix.Close(fd)
	return readable(ctx, fd)
}

// readable waits for fd to be readable, or for ctx to end: poll(2) on fd and on a pipe
// written when ctx ends.
func readable(ctx context.Context, fd int) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-stopped }() // before the pipe is closed
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			unix.Write(p[1], []byte{0})
		case <-stop:
		}
	}()
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(p[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if fds[0].Revents != 0 {
			return nil
		}
		if fds[1].Revents != 0 {
			return ctx.Err()
		}
	}
}

// Dir waits until cond holds, looking at it first and then each time an entry of dir is
// made, written, changed, renamed or removed. While dir is missing it watches the nearest
// ancestor that exists, and dir once that makes it. cond must hold once the change it waits
// for is made in dir: a file's appearance, a socket that accepts once it is chmodded, ….
func Dir(ctx context.Context, dir string, cond func() bool) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	watched := ""
	for {
		// Watch dir, or its nearest ancestor while it is missing; then look, so that no change
		// made before the watch is missed.
		for d := filepath.Clean(dir); d != watched; d = filepath.Dir(d) {
			if err := w.Add(d); err == nil {
				if watched != "" {
					w.Remove(watched)
				}
				watched = d
				break
			} else if !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
				return fmt.Errorf("watch %s: %w", d, err)
			}
		}
		if cond() {
			return nil
		}
		select {
		case <-w.Events:
		case err := <-w.Errors:
			if !errors.Is(err, fsnotify.ErrEventOverflow) { // changes were lost: look again
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("watching %s: %w", dir, ctx.Err())
		}
	}
}

// File waits until path exists.
func File(ctx context.Context, path string) error {
	return Dir(ctx, filepath.Dir(path), func() bool {
		_, err := os.Lstat(path)
		return err == nil
	})
}

// Socket waits until the unix socket at path accepts a connection, trying at each change in
// its directory. bind(2) makes the socket's file before listen(2), so a connection tried at
// that change may be refused: the listener must change the file once it listens (a chmod,
// as Paddock's daemon and containerd make) for the wait to see it.
func Socket(ctx context.Context, path string) error {
	return Dir(ctx, filepath.Dir(path), func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Poll waits until cond holds, looking every period. It is only for a state that no event
// announces, named where it is called: the count of a process's goroutines or descriptors,
// the processes that run on a machine, the containers an engine lists.
func Poll(ctx context.Context, period time.Duration, cond func() bool) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for !cond() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Hear reads the named pipe at path to its end: it waits until a program has opened it,
// written and closed it, or until ctx ends.
func Hear(ctx context.Context, path string) (string, error) {
	c := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(path)
		c <- b
	}()
	select {
	case b := <-c:
		return string(b), nil
	case <-ctx.Done():
		return "", fmt.Errorf("nothing wrote %s: %w", path, ctx.Err())
	}
}
