package containerd

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// An address where something listens but never answers (or nothing listens) fails within
// the dial timeout, naming the address: it does not wait forever.
func TestConnectSilentAddress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept, read nothing, answer nothing
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, addr := range []string{sock, filepath.Join(t.TempDir(), "none.sock")} {
		c, err := Connect(context.Background(), addr)
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected", addr)
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("the error does not name %s: %v", addr, err)
		}
	}
}
