package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryMutationApplies keeps the mutant table in step with the code:
// an edit whose text no longer occurs exactly once would make the mutation
// check fail in CI, minutes later.
func TestEveryMutationApplies(t *testing.T) {
	root, err := productRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		for _, e := range m.Edits {
			b, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				t.Fatalf("%s: %v", m.ID, err)
			}
			if n := strings.Count(string(b), e.Old); n != 1 {
				t.Errorf("%s (%s): %s: the text to mutate occurs %d times, want 1", m.ID, m.Name, e.File, n)
			}
		}
	}
}

// TestEveryKillerExists keeps the killers table in step with the tests: a
// renamed test would only cost time (the whole package runs), but the
// table should say what is true.
func TestEveryKillerExists(t *testing.T) {
	root, err := productRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		k := killers[m.ID]
		if k == "" {
			t.Errorf("%s (%s): no killer named", m.ID, m.Name)
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, m.pkg(), "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || strings.Contains(string(b), "\nfunc "+k+"(t *testing.T) {")
		}
		if !found {
			t.Errorf("%s (%s): killer %s is not a test of %s", m.ID, m.Name, k, m.pkg())
		}
	}
	if len(killers) != len(mutants) {
		t.Errorf("%d killers for %d mutants", len(killers), len(mutants))
	}
}
