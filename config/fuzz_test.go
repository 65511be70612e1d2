package config

import (
	"path/filepath"
	"strconv"
	"testing"
)

// FuzzProjectSettings decodes any bytes as a project's settings file, in each format, under
// each trusted file of globals: Load never fails or panics because of it, and the trusted
// settings are those Load gives without it. The seed corpus is in
// testdata/fuzz/FuzzProjectSettings (the examples of TestDecodeProject, random attacks of
// TestProjectNeverWidens, and what fuzzing found).
// law: project_never_widens
func FuzzProjectSettings(f *testing.F) {
	f.Setenv("XDG_CONFIG_HOME", f.TempDir())
	dir := f.TempDir()
	files := make([]string, len(globals))
	for i, g := range globals {
		if g != "" {
			files[i] = filepath.Join(dir, "global"+strconv.Itoa(i)+".yaml")
			write(f, files[i], g)
		}
	}
	formats := []string{"yaml", "json", "toml", "yml"}
	f.Fuzz(func(t *testing.T, global, format uint8, body []byte) {
		g := files[int(global)%len(files)]
		ext := formats[int(format)%len(formats)]
		checkNeverWidens(t, g, ext, body)
	})
}
