//go:build !linux && !darwin

package workspace

import "errors"

// exchange is not available here: a hand-back that must put a directory in a file's place
// (or a file in an emptied directory's) fails rather than do it in two steps.
func exchange(a, b string) error {
	return &pathError{op: "exchange", path: b, err: errors.ErrUnsupported}
}

// exchangeAt is not available here either.
func exchangeAt(_ int, _, _, display string) error {
	return &pathError{op: "exchange", path: display, err: errors.ErrUnsupported}
}
