//go:build !linux && !darwin

package workspace

func reflink(_, _ int, _, _ string) error { return errNoReflink }

const reflinkCreates = false

func copyBytes(dst, src int, size int64) error { return copyLoop(dst, src, 0, size) }
