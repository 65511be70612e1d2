//go:build linux && !amd64

package main

// archAttacks are x86_64's alone (its legacy calls, x32 and the i386 gate): elsewhere the
// *at calls every architecture has are tried.
func archAttacks() []attack { return nil }
