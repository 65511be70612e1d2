package workspace

import "fmt"

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

// Error is a refusal with a stable Code and a message fit for the user.
type Error struct {
	Code string
	Msg  string
	Err  error // the underlying cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error with the same Code, so errors.Is(err, &Error{Code: c}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
