//go:build linux

package kernel_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// `paddock-kernel join`, which the host's key passes through, is undumpable: its /proc
// files are root's, not its user's (here, as root, run with a group of its own), so that no
// process of the sandbox reads or steers it.
func TestJoinUndumpable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kernel.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(kernelBin, "join", sock)
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 12345}}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	c, err := l.AcceptUnix() // join runs, past its start
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/status", &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Gid != 0 {
		t.Errorf("join's /proc files are %d:%d's, want 0:0 (undumpable)", st.Uid, st.Gid)
	}
}
