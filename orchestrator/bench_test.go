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

// shellLoop is a script outside the grammar: ten commands, each judged as it runs.
const shellLoop = "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done"

// BenchmarkShellLoop runs shellLoop through the kernel's shell, every command judged by the
// host; BenchmarkBashLoop is the peer, bash -c running the same script with nothing judged.
func BenchmarkShellLoop(b *testing.B) {
	s := openLocal(b, b.TempDir(), Config{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.Bash(ctx, shellLoop)
		if err != nil || res.End.Status != 0 {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkBashLoop(b *testing.B) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		b.Skip("no bash")
	}
	for i := 0; i < b.N; i++ {
		if err := exec.Command(bash, "-c", shellLoop).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
