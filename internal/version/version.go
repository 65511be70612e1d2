// Package version says which build of Paddock is running: the module version, and the commit
// and Go version it was built from.
package version

import (
	"fmt"
	"runtime/debug"
)

// Module is the module version the binary was built from; (devel) for a source tree's build.
func Module() string {
	bi, _ := debug.ReadBuildInfo()
	return module(bi)
}

// String is the module version, the commit the binary was built from (+dirty when the tree
// had changes) and the Go version: what paddock --version prints.
func String() string {
	bi, _ := debug.ReadBuildInfo()
	return describe(bi)
}

func module(bi *debug.BuildInfo) string {
	if bi != nil && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func describe(bi *debug.BuildInfo) string {
	commit, dirty := "unknown", false
	goVersion := ""
	if bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if dirty {
		commit += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", module(bi), commit, goVersion)
}
