// Package kernel is the logic of paddock-kernel, the small static program a host starts in
// a sandbox. It reads request frames on standard input and writes frames on standard
// output: it runs pipelines (one process group each, joined by OS pipes, their output
// streamed back), sends signals to them, reads directories and file facts, and relays the
// requests of programs in the sandbox to the host through a private unix socket. When its
// input ends it kills everything it started, and every descendant of it, and exits.
//
// The kernel runs on Linux alone: it relies on process groups, a child subreaper and /proc.
package kernel
