//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// Join joins in and out to the listening kernel's unix socket at sock: what comes on in
// goes to the socket (its end ends the socket's writing half), and what comes from the
// socket goes to out, until the socket's side ends. It is how a host reaches a listening
// kernel where it can run a program in the sandbox but not dial into it (a pod's exec
// channel): the channel's standard streams become the connection.
//
// The kernel renames its socket into place once it listens; a socket not there yet, or
// not yet listening, is tried again for up to wait (a bounded poll: nothing in the sandbox
// says when it appears but the file itself).
func Join(sock string, in io.Reader, out io.Writer, wait time.Duration) error {
	c, err := dialWaiting(sock, wait)
	if err != nil {
		return err
	}
	defer c.Close()
	// The copy in ends with in, or with the process once the socket's side has ended.
	go func() {
		io.Copy(c, in)
		c.CloseWrite()
	}()
	_, err = io.Copy(out, c)
	return err
}

// dialWaiting connects to sock, trying again while it is not there or refuses, up to wait.
func dialWaiting(sock string, wait time.Duration) (*net.UnixConn, error) {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return nil, fmt.Errorf("join %s: %w", sock, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}
