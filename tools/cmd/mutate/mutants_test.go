package main

import (
	"fmt"
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
		found := killerFile(root, m) != ""
		if !found {
			t.Errorf("%s (%s): killer %s is not a test of %s", m.ID, m.Name, k, m.pkg())
		}
	}
	if len(killers) != len(mutants) {
		t.Errorf("%d killers for %d mutants", len(killers), len(mutants))
	}
}

// TestShardsPartitionTheTable: the N shards of a sample together run every
// mutant once, and a change to a mutant's file or its killer's adds it to
// any shard.
func TestShardsPartitionTheTable(t *testing.T) {
	root, err := productRoot()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 4 {
		kept, err := sample(root, mutants, fmt.Sprintf("%d/4", i), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kept {
			seen[m.ID]++
		}
	}
	for _, m := range mutants {
		if seen[m.ID] != 1 {
			t.Errorf("%s in %d of the 4 shards, want 1", m.ID, seen[m.ID])
		}
	}
	m := mutants[1] // not in shard 0/4
	if !touches(root, m, map[string]bool{m.Edits[0].File: true}) {
		t.Errorf("%s: a change to %s does not touch it", m.ID, m.Edits[0].File)
	}
	if f := killerFile(root, m); !touches(root, m, map[string]bool{f: true}) {
		t.Errorf("%s: a change to its killer's file %q does not touch it", m.ID, f)
	}
	if touches(root, m, map[string]bool{"README.md": true}) {
		t.Errorf("%s: touched by a change to README.md", m.ID)
	}
	diff := "@@ -1 +1 @@\n+\t{\"SL10\", \"a body\", []edit{\n-\t\"M2\":   \"TestOld\",\n+\t\"M28b\": \"TestNew\",\n+\t\t{\"dispatch/x.go\", \"a\", \"b\"},\n"
	var ids []string
	for _, m := range tableID.FindAllStringSubmatch(diff, -1) {
		ids = append(ids, m[1])
	}
	if fmt.Sprint(ids) != "[SL10 M28b]" {
		t.Errorf("the table's changed lines name %v, want [SL10 M28b]", ids)
	}
	if _, err := sample(root, mutants, "4/4", ""); err == nil {
		t.Error("-shard 4/4 accepted")
	}
}
