// Package errdefs is Paddock's closed set of error classes, in the manner of containerd's:
// every error a front end shows carries a class (what kind of failure: the caller's, a
// missing thing, a refusal, the machine's), a stable code (what exactly, for programs) and a
// message safe to show. One table maps a class to its HTTP status (HTTPStatus), and each
// front end has one switch from class to its own outcome (the CLI's exit codes).
package errdefs

import (
	"context"
	"errors"
)

// Class is the kind of a failure.
type Class int

const (
	// Internal: a failure of Paddock or of what it runs on, not the caller's to fix.
	Internal Class = iota
	// InvalidArgument: the request (a command line, a setting, a script that does not
	// parse, a working directory that is not there) cannot be carried out as written.
	InvalidArgument
	// NotFound: what the request names (a session, a job, a file) is not there.
	NotFound
	// Conflict: the request does not fit the state of what it names (a session closed or
	// ended).
	Conflict
	// Gone: what the request answers was there and has gone (a question no longer asked).
	Gone
	// PermissionDenied: the policy refused the request (a path outside, a secret).
	PermissionDenied
	// Refused: the request was understood and not carried out (a limit reached, a kernel
	// that stopped reading, a handler that cannot be replaced).
	Refused
	// Unavailable: the machine cannot provide what is needed (no kernel binary for it).
	Unavailable
	// DeadlineExceeded: the request's time ran out.
	DeadlineExceeded
	// Canceled: the caller gave the request up.
	Canceled
)

var names = [...]string{"internal", "invalid_argument", "not_found", "conflict", "gone",
	"permission_denied", "refused", "unavailable", "deadline_exceeded", "canceled"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(names) {
		return "internal"
	}
	return names[c]
}

// statuses is the one table from class to HTTP status. (Numbers, not net/http's names: the
// kernel binary links this package through script, and net/http would double its size.)
var statuses = [...]int{
	Internal:         500,
	InvalidArgument:  400,
	NotFound:         404,
	Conflict:         409,
	Gone:             410,
	PermissionDenied: 403,
	Refused:          422,
	Unavailable:      503,
	DeadlineExceeded: 408,
	Canceled:         499, // the client closed the request, as nginx says it
}

// HTTPStatus is the class's HTTP status.
func HTTPStatus(c Class) int {
	if c < 0 || int(c) >= len(statuses) {
		return 500
	}
	return statuses[c]
}

// FromHTTPStatus is the class an HTTP status stands for (HTTPStatus's inverse): what a
// client makes of a daemon's answer.
func FromHTTPStatus(status int) Class {
	for c, st := range statuses {
		if st == status {
			return Class(c)
		}
	}
	if status >= 400 && status < 500 {
		return InvalidArgument
	}
	return Internal
}

// Classed is an error that says its class and its stable code.
type Classed interface {
	error
	Class() Class
	Code() string
}

// Error is a classed error made here.
type Error struct {
	class Class
	code  string
	msg   string
	err   error
}

// New is an error of class c with a stable code and a message.
func New(c Class, code, msg string) *Error { return &Error{class: c, code: code, msg: msg} }

// Wrap is err given class c and a stable code; its message is err's.
func Wrap(c Class, code string, err error) *Error { return &Error{class: c, code: code, err: err} }

func (e *Error) Error() string {
	if e.err != nil {
		if e.msg != "" {
			return e.msg + ": " + e.err.Error()
		}
		return e.err.Error()
	}
	return e.msg
}
func (e *Error) Unwrap() error { return e.err }
func (e *Error) Class() Class  { return e.class }
func (e *Error) Code() string  { return e.code }

// Of is err's class and code: those of the first classed error in its chain, else
// DeadlineExceeded ("timeout") or Canceled ("canceled") for a context's, else Internal
// ("failed").
func Of(err error) (Class, string) {
	var c Classed
	switch {
	case err == nil:
		return Internal, ""
	case errors.As(err, &c):
		return c.Class(), c.Code()
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded, "timeout"
	case errors.Is(err, context.Canceled):
		return Canceled, "canceled"
	}
	return Internal, "failed"
}
