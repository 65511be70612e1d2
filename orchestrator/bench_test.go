package orchestrator

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkForkExecTrue is the peer of a step: fork/exec of /bin/true from Go.
func BenchmarkForkExecTrue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrue is a whole call of the bash tool with one `true` step: parsed, expanded
// and decided on the host, run through the kernel, its reply read back.
func BenchmarkBashTrue(b *testing.B) {
	s := openLocal(b, b.TempDir(), Config{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.Bash(ctx, "/bin/true")
		if err != nil || res.End.Status != 0 {
			b.Fatal(err, res)
		}
	}
}
