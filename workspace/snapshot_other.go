//go:build !linux

package workspace

import "errors"

func snapshotsHere(_, _ string) (bool, string) { return false, "snapshots need btrfs on Linux" }

func snapshot(_, _ string, _ bool) error { return errors.New("snapshots need btrfs on Linux") }

func destroySubvolume(name string) error { return removeAll(name) }
