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
	root := filepath.Join("..", "..")
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
