package policy

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/script"
)

// benchTree makes a small real workspace: git, sources, a build directory, a vendored
// repository, a home with credential stores.
func benchTree(b *testing.B) (ws, home string) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return benchTreeIn(b, dir)
}

func benchTreeIn(b testing.TB, dir string) (ws, home string) {
	ws, home = filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{"ws/.git/refs", "ws/src/pkg", "ws/build/obj", "ws/vendor/lib/.git", "ws/docs", "home/.ssh", "home/.config/paddock"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{"ws/src/main.go", "ws/src/a.go", "ws/src/pkg/b.go", "ws/README.md", "ws/build/obj/x.o", "home/.ssh/id_ed25519"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Symlink("src", filepath.Join(ws, "code")); err != nil {
		b.Fatal(err)
	}
	return ws, home
}

// benchMix is a realistic mix of an agent's steps: mostly reads, some writes, git, a few
// network and unknown programs, one secret.
func benchMix(ws, home string) []Step {
	at := func(line ...string) Step { return Step{Argv: line, Cwd: ws} }
	out := func(s Step, path string) Step { s.Redirects = []Redirect{{1, ">", path}, {2, ">&", "1"}}; return s }
	return []Step{
		at("cat", "src/main.go"),
		at("ls"),
		at("ls", "-la", "src"),
		at("grep", "-rn", "TODO", "src"),
		at("rg", "-n", "func main"),
		at("head", "-n", "50", "README.md"),
		at("find", ".", "-name", "*.go"),
		at("wc", "-l", "src/main.go", "src/a.go", "src/pkg/b.go"),
		at("git", "log", "--oneline", "-n", "20"),
		at("git", "diff", "--cached"),
		at("git", "status"),
		at("sed", "-i", "s/foo/bar/g", "src/a.go"),
		at("cp", "src/a.go", "code/c.go"),
		at("rm", "-rf", "build"),
		at("mkdir", "-p", "build/out"),
		out(at("echo", "done"), "build/log.txt"),
		at("curl", "-sSLo", "out.json", "https://example.com/api"),
		at("go", "test", "./..."),
		at("python3", "tools/gen.py", "--out", "src/gen.go"),
		at("cat", home+"/.ssh/id_ed25519"),
	}
}

func benchContext(ws, home string) *Context {
	return &Context{
		Cwd: ws, Home: home, Roots: []string{ws},
		Env:  []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin"},
		Auto: DefaultAutoSet(),
	}
}

// BenchmarkStepEffects classifies the mix on the real disk with one context, as a session
// does between calls.
func BenchmarkStepEffects(b *testing.B) {
	ws, home := benchTree(b)
	mix := benchMix(ws, home)
	ctx := benchContext(ws, home)
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		for _, s := range mix {
			StepEffects(ctx, s)
		}
	}
	reportSteps(b, b.N*len(mix), cpu)
}

// reportSteps reports steps per second of wall time, and per second of this process's CPU
// time (user and system), which a loaded machine disturbs less.
func reportSteps(b *testing.B, steps int, cpuStart time.Duration) {
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
	if d := cpuTime() - cpuStart; d > 0 {
		b.ReportMetric(float64(steps)/d.Seconds(), "steps/cpu-s")
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheck parses, expands and classifies a script of the same steps with a new
// context each time, as paddock policy check does once.
func BenchmarkCheck(b *testing.B) {
	ws, home := benchTree(b)
	src := `cat src/main.go; ls; ls -la src; grep -rn TODO src; rg -n 'func main'; head -n 50 README.md
find . -name '*.go'; wc -l src/*.go; git log --oneline -n 20; git diff --cached; git status
sed -i s/foo/bar/g src/a.go; cp src/a.go code/c.go; rm -rf build; mkdir -p build/out
echo done > build/log.txt 2>&1; curl -sSLo out.json https://example.com/api; go test ./...
python3 tools/gen.py --out src/gen.go; cat ~/.ssh/id_ed25519`
	sc, err := script.Parse(src)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		a := Check(benchContext(ws, home), sc)
		if len(a.Steps) != 20 {
			b.Fatalf("%d steps", len(a.Steps))
		}
	}
	reportSteps(b, b.N*20, cpu)
}

// BenchmarkRunTrue is the peer: what running the cheapest step costs at all (fork and exec
// of true), against which the policy's cost per step is measured.
func BenchmarkRunTrue(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true on PATH")
	}
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if err := exec.Command(path).Run(); err != nil {
			b.Fatal(err)
		}
	}
	reportSteps(b, b.N, cpu) // the child's own CPU time is not counted: a floor
}

// BenchmarkStepEffectsMapFS classifies the same mix over the same tree held in memory: the
// decisions' own cost, without the disk.
func BenchmarkStepEffectsMapFS(b *testing.B) {
	ws, home := "/work/ws", "/home/me"
	m := NewMapFS(ws+"/.git/refs/", ws+"/src/pkg/b.go", ws+"/src/main.go", ws+"/src/a.go", ws+"/README.md",
		ws+"/build/obj/x.o", ws+"/vendor/lib/.git/", ws+"/docs/", ws+"/code -> src", home+"/.ssh/id_ed25519",
		home+"/.config/paddock/", "/usr/bin/", "/bin -> usr/bin")
	mix := benchMix(ws, home)
	ctx := benchContext(ws, home)
	ctx.FS = m
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		for _, s := range mix {
			StepEffects(ctx, s)
		}
	}
	reportSteps(b, b.N*len(mix), cpu)
}
