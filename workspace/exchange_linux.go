package workspace

import "golang.org/x/sys/unix"

// exchange swaps the entries at a and b in one step (renameat2 RENAME_EXCHANGE), so a
// directory can take the place of a file, or a file of an empty directory, with no moment
// where neither is there.
func exchange(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return &pathError{op: "exchange", path: b, err: err}
	}
	return nil
}

// exchangeAt swaps the entries a and b of the directory dirfd in one step.
func exchangeAt(dirfd int, a, b, display string) error {
	if err := unix.Renameat2(dirfd, a, dirfd, b, unix.RENAME_EXCHANGE); err != nil {
		return &pathError{op: "exchange", path: display, err: err}
	}
	return nil
}
