//go:build linux

package kernel_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// BenchmarkTrueStep is one exec of /bin/true through a running kernel: the request written,
// the process started, waited for and reported, the reply read. Compare with
// BenchmarkForkExecTrue, the same process run from Go directly.
func BenchmarkTrueStep(b *testing.B) {
	k := startKernel(b, "")
	x := wire.Exec{Env: []string{"PATH=" + os.Getenv("PATH")}, Commands: []wire.Command{{Argv: []string{"/bin/true"}}}}
	for b.Loop() {
		id := k.request(wire.TypeExec, x)
		f, ok := k.next(id, 10*time.Second)
		if !ok || f.Event != wire.EventReply || f.Status != wire.StatusOK {
			b.Fatalf("reply %+v", f)
		}
	}
}

// BenchmarkForkExecTrue is the peer: exec.Command("/bin/true").Run() from Go.
func BenchmarkForkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
