package workspace

import "golang.org/x/sys/unix"

// exchange swaps the entries at a and b in one step (renamex_np RENAME_SWAP).
func exchange(a, b string) error {
	if err := unix.RenamexNp(a, b, unix.RENAME_SWAP); err != nil {
		return &pathError{op: "exchange", path: b, err: err}
	}
	return nil
}

// exchangeAt swaps the entries a and b of the directory dirfd in one step.
func exchangeAt(dirfd int, a, b, display string) error {
	if err := unix.RenameatxNp(dirfd, a, dirfd, b, unix.RENAME_SWAP); err != nil {
		return &pathError{op: "exchange", path: display, err: err}
	}
	return nil
}
