//go:build linux

package setid

// archCalls are none on arm64: it has only the *at calls, which every architecture tries.
var archCalls []archCall
