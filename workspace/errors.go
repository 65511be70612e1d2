package workspace

import (
	"fmt"

	"github.com/paddockhq/paddock/errdefs"
)

// Codes of the refusals this package makes on purpose.
const (
	CodeTooManyFiles = "too_many_files" // the parent lists more files than an isolated workspace holds
	CodeNotDirectory = "not_directory"  // the parent is not a directory
	CodeExists       = "exists"         // the workspace directory is already in use
	CodeNoManifest   = "no_manifest"    // the directory holds no workspace made by Clone
	CodeBadManifest  = "bad_manifest"   // the manifest cannot be read
	CodeInside       = "inside"         // the workspace directory lies inside the parent's listed files
	CodeRelinks      = "relinks"        // the parent's names of a child's file kept changing as the hand-back linked them
)

// classes is the class of each code, for errdefs.
var classes = map[string]errdefs.Class{
	CodeTooManyFiles: errdefs.Refused,
	CodeNotDirectory: errdefs.InvalidArgument,
	CodeExists:       errdefs.Conflict,
	CodeNoManifest:   errdefs.NotFound,
	CodeBadManifest:  errdefs.Internal,
	CodeInside:       errdefs.InvalidArgument,
	CodeRelinks:      errdefs.Conflict,
}

// Error is a refusal with a stable code (Reason) and a message fit for the user.
type Error struct {
	Reason string // one of the Code constants
	Msg    string
	Err    error // the underlying cause, if any
}

// Code is the refusal's stable code.
func (e *Error) Code() string { return e.Reason }

// Class is the refusal's class among errdefs's.
func (e *Error) Class() errdefs.Class {
	if c, ok := classes[e.Reason]; ok {
		return c
	}
	return errdefs.Internal
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Reason, so errors.Is(err, &Error{Reason: c}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}
