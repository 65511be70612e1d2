//go:build linux

package main

// archAttacks are none on arm64: it has no chmod, open, creat or mknod of its own (only the
// *at forms, tried everywhere), and a 64-bit process cannot make 32-bit calls.
func archAttacks() []attack { return nil }
