//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/paddockhq/paddock/transport/wire"
)

// Error codes of the kernel's replies. They are stable: the host decides by them.
const (
	CodeBadRequest  = "bad_request"  // the request cannot be read or asks for something impossible
	CodeNotFound    = "not_found"    // no such path, or no such running exec
	CodePermission  = "permission"   // the sandbox refuses the access
	CodeUnknownType = "unknown_type" // a request type the kernel does not serve
	CodeIO          = "io"           // any other failure of the system
)

// errorf makes a reply error with a code.
func errorf(code, format string, args ...any) *wire.Error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// classify gives the reply error for a failure of the system: its code says what kind of
// failure, its message what failed.
func classify(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	code := CodeIO
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		code = CodeNotFound
	case errors.Is(err, fs.ErrPermission):
		code = CodePermission
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG):
		code = CodeBadRequest
	}
	return &wire.Error{Code: code, Message: err.Error()}
}
