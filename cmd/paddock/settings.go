package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
)

// loadSettings reads the settings for a command working in workspace, binding the command's
// flags named in keys; warnings go to w.
func loadSettings(workspace string, fs *pflag.FlagSet, keys map[string]string, w io.Writer) (*config.Loaded, error) {
	l, err := config.Load(config.Options{Workspace: workspace, Flags: fs, FlagKeys: keys})
	if err != nil {
		// The settings are the command line's extension: one that cannot be read is a usage
		// error, as a bad flag is.
		return nil, &usageError{msg: err.Error(), err: err}
	}
	for _, warn := range l.Warnings {
		fmt.Fprintln(w, "paddock: warning:", warn)
	}
	return l, nil
}
