package main

import (
	"os"
	"testing"
)

// TestMain keeps the CLI's own state (its audit file) out of the home of whoever runs the
// tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "paddock-test-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
