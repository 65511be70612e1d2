//go:build linux

package setid

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// The offsets of seccomp_data's fields. An argument is read by its low 32-bit word, which
// is its first on a little-endian machine and its second on a big-endian one; the high
// word is never looked at, as the kernel ignores it for an int or a mode_t.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLow is the offset of argument i's low word.
func argLow(bigEndian bool, i int) uint32 {
	off := offArgs + 8*uint32(i)
	if bigEndian {
		off += 4
	}
	return off
}

// Program is the filter as classic BPF: for each architecture in turn, a block that is
// entered when the call's architecture is the block's, looks at the call's number and, for
// a rule's call, at its arguments, and always returns. A call of another architecture
// gets unknownArch.
//
// A call no rule names is allowed after loading nothing but the architecture and the
// number, so the kernel's filter cache (which runs the filter once per call number and
// remembers a constant allow) lets every other call through without running the filter:
// the filter costs nothing for read, write, futex and the rest.
func Program() ([]bpf.Instruction, error) {
	prog := []bpf.Instruction{bpf.LoadAbsolute{Off: offArch, Size: 4}}
	for _, t := range tables {
		block := t.block()
		if len(block) > 255 {
			return nil, fmt.Errorf("setid: the %s block is %d instructions, more than a jump skips", t.name, len(block))
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: t.arch, SkipFalse: uint8(len(block))})
		prog = append(prog, block...)
	}
	return append(prog, ret(unknownArch)), nil
}

// block is one architecture's part: it loads the number and returns on every path.
func (t table) block() []bpf.Instruction {
	b := []bpf.Instruction{bpf.LoadAbsolute{Off: offNr, Size: 4}}
	if t.x32 {
		b = append(b,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
			ret(x32Refusal))
	}
	for _, r := range t.rules {
		h := r.handler(t.bigEndian)
		b = append(b, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(h))})
		b = append(b, h...)
	}
	return append(b, ret(Allow))
}

// handler is a rule's check of the arguments; it returns on every path.
func (r rule) handler(bigEndian bool) []bpf.Instruction {
	refuse := ret(Refuse(r.errno))
	switch r.check {
	case modeHasSetID:
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: argLow(bigEndian, r.mode), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setIDBits, SkipFalse: 1},
			refuse,
			ret(Allow),
		}
	case createsWithSetID:
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: argLow(bigEndian, r.flags), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: creating, SkipFalse: 3},
			bpf.LoadAbsolute{Off: argLow(bigEndian, r.mode), Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setIDBits, SkipFalse: 1},
			refuse,
			ret(Allow),
		}
	default:
		return []bpf.Instruction{refuse}
	}
}

func ret(a Action) bpf.Instruction { return bpf.RetConstant{Val: uint32(a)} }
