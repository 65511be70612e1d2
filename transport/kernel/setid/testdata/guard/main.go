//go:build linux

// Command guard runs a program under setid.Guard, as the kernel puts itself and its
// sandbox: the tests' way to hold a process of their own to the filter. It is built
// without cgo, as the kernel is (Guard drops a capability on every thread, which a cgo or
// race build cannot).
package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/paddockhq/paddock/transport/kernel/setid"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guard PROGRAM [ARG...]")
		os.Exit(2)
	}
	if err := setid.Guard(); err != nil {
		fmt.Fprintln(os.Stderr, "guard:", err)
		os.Exit(111)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	fmt.Fprintln(os.Stderr, "guard:", err)
	os.Exit(112)
}
