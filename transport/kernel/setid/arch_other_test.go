//go:build linux && !amd64

package setid

// archCalls are x86_64's alone: elsewhere the *at calls every architecture has are tried.
var archCalls []archCall
