package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sample keeps, of the mutants ms, those of one shard ("I/N": the Ith of
// every N, in the table's order) and those a change since the git
// revision rev touches: a mutant whose edited file changed, or the file
// of the test that kills it. .ci/run runs such a sample, a different shard
// at each commit (.ci/mutate runs them all): a change to a mechanism or to
// its killer is checked at once, every other mutant once in N commits.
// With rev empty, or a revision the clone does not have (a shallow clone's
// parent), the shard alone.
func sample(root string, ms []mutant, shard, rev string) ([]mutant, error) {
	var i, n int
	if _, err := fmt.Sscanf(shard, "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return nil, fmt.Errorf("-shard %q: want I/N with 0 ≤ I < N", shard)
	}
	touched := map[string]bool{}
	if rev != "" {
		cmd := exec.Command("git", "diff", "--name-only", "--relative", rev, "--")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			fmt.Printf("-changed %s: %v (%s): the shard alone\n", rev, err, strings.TrimSpace(stderr.String()))
		}
		for _, f := range strings.Fields(string(out)) {
			touched[f] = true
		}
	}
	var kept []mutant
	byChange := 0
	for k, m := range ms {
		switch {
		case k%n == i:
			kept = append(kept, m)
		case touches(root, m, touched):
			kept = append(kept, m)
			byChange++
		}
	}
	fmt.Printf("shard %d/%d: %d of %d mutants, %d of them touched by the change since %q\n", i, n, len(kept), len(ms), byChange, rev)
	return kept, nil
}

// touches reports whether a file m edits, or the test file that defines
// its killer, is among the changed files.
func touches(root string, m mutant, changed map[string]bool) bool {
	if len(changed) == 0 {
		return false
	}
	for _, e := range m.Edits {
		if changed[e.File] {
			return true
		}
	}
	return changed[killerFile(root, m)]
}

// killerFile is the test file, relative to root, that defines m's killer,
// or "" if none does.
func killerFile(root string, m mutant) string {
	k := killers[m.ID]
	files, _ := filepath.Glob(filepath.Join(root, m.pkg(), "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("\nfunc "+k+"(t *testing.T) {")) {
			rel, _ := filepath.Rel(root, f)
			return rel
		}
	}
	return ""
}
