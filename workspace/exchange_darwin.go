package workspace

import "golang.org/x/sys/unix"

// exchange swaps the entries at a and b in one step (renamex_np RENAME_SWAP).
func exchange(a, b string) error {
	if err := unix.RenamexNp(a, b, unix.RENAME_SWAP); err != nil {
		return &pathError{op: "exchange", path: b, err: err}
	}
	return nil
}
