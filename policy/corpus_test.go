package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/policy/policytest"
	"github.com/paddockhq/paddock/script"
)

// corpusFiles are the corpus copies to judge: the one kept here, and the shared one next to
// the repository when it is there.
func corpusFiles(t *testing.T) []string {
	files := []string{filepath.Join("testdata", "commands.tsv")}
	shared := filepath.Join("..", "..", "shared", "corpus", "commands.tsv")
	if _, err := os.Stat(shared); err == nil {
		files = append(files, shared)
	}
	return files
}

// TestCorpus judges every row of the command corpus with Check, in the fixture it
// describes.
func TestCorpus(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := policytest.Fixture(ws); err != nil {
		t.Fatal(err)
	}
	for _, file := range corpusFiles(t) {
		rows, err := policytest.ReadCorpus(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			sc, err := script.Parse(row.Command)
			if err != nil {
				t.Errorf("%s:%d: %q: %v", file, row.Line, row.Command, err)
				continue
			}
			ctx := &policy.Context{Cwd: ws, Env: policytest.CorpusEnv(ws), Roots: []string{ws}, Auto: policy.DefaultAutoSet()}
			got := policy.Check(ctx, sc).Effects.Strings()
			if !slices.Equal(got, row.Effects) {
				t.Errorf("%s:%d: %q: effects %v, want %v (%s)", file, row.Line, row.Command, got, row.Effects, row.Why)
			}
		}
	}
}
