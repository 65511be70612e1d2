//go:build linux && !amd64

package kernel

// Elsewhere the tracer is not built yet (gVisor runs on arm64 too: there the registers
// would be read and written through PTRACE_GETREGSET): a command runs untraced, and a
// runtime that refuses the flag fails it as it does.
const (
	automountMendable = false
	automountArch     = 0
	sysStatx          = 0
	sysNewfstatat     = 0
	statxFlags        = 0
	newfstatatFlags   = 0
)

func clearAutomount(int) error { return nil }
