//go:build linux

package kernel_test

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/transport/kernel"
	"github.com/paddockhq/paddock/transport/wire"
)

// The kernel forwards each connection to its loopback address to the host's socket, bytes
// and half-closes both ways; a second request for the same socket answers the same address.
func TestEgressForwards(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "proxy.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "host got "+line)
				c.Close()
			}()
		}
	}()
	k := startKernel(t, dir)
	var r wire.EgressReply
	k.call(wire.TypeEgress, wire.Egress{Socket: sock, Listen: "127.0.0.1:0"}, &r)
	var again wire.EgressReply
	k.call(wire.TypeEgress, wire.Egress{Socket: sock, Listen: "127.0.0.1:0"}, &again)
	if r.Addr == "" || again.Addr != r.Addr {
		t.Fatalf("addresses %q, %q", r.Addr, again.Addr)
	}
	if e := k.callErr(wire.TypeEgress, wire.Egress{Socket: sock + "2", Listen: "127.0.0.1:0"}); e.Code != kernel.CodeBadRequest {
		t.Fatalf("another socket: %v", e)
	}
	for range 3 {
		c, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "hello\n")
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "host got hello\n" {
			t.Fatalf("got %q", b)
		}
	}
	if e := k.callErr(wire.TypeEgress, wire.Egress{}); e.Code != kernel.CodeBadRequest {
		t.Fatalf("empty request: %v", e)
	}
	if err := k.closeAndWait(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", r.Addr); err == nil {
		c.Close()
		t.Fatal("the kernel's listener outlived it")
	}
}
