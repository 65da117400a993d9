package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// sample keeps, of the mutants ms, those of one shard ("I/N": the Ith of
// every N, in the table's order) and those a change since the git
// revision rev touches: a mutant whose edited file changed, the file of
// the test that kills it, or its lines in the mutant or killers table.
// .ci/run runs such a sample, a different shard at each commit
// (.ci/mutate runs them all): a change to a mechanism or to its killer is
// checked at once, every other mutant once in N commits.
// With rev empty, or a revision the clone does not have (a shallow clone's
// parent), the shard alone.
func sample(root string, ms []mutant, shard, rev string) ([]mutant, error) {
	var i, n int
	if _, err := fmt.Sscanf(shard, "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n {
		return nil, fmt.Errorf("-shard %q: want I/N with 0 ≤ I < N", shard)
	}
	touched, retabled := map[string]bool{}, map[string]bool{}
	if rev != "" {
		out, err := git(root, "diff", "--name-only", "--relative", rev, "--")
		if err != nil {
			fmt.Printf("-changed %s: %v: the shard alone\n", rev, err)
		}
		for _, f := range strings.Fields(out) {
			touched[f] = true
		}
		// The table itself: the mutants whose first line or killer the
		// change adds or edits (a new mutant, another killer named).
		if out, err = git(root, "diff", "-U0", rev, "--", "tools/cmd/mutate/"); err == nil {
			for _, id := range tableID.FindAllStringSubmatch(out, -1) {
				retabled[id[1]] = true
			}
		}
	}
	var kept []mutant
	byChange := 0
	for k, m := range ms {
		switch {
		case k%n == i:
			kept = append(kept, m)
		case retabled[m.ID] || touches(root, m, touched):
			kept = append(kept, m)
			byChange++
		}
	}
	fmt.Printf("shard %d/%d: %d of %d mutants, %d of them touched by the change since %q\n", i, n, len(kept), len(ms), byChange, rev)
	return kept, nil
}

// tableID matches an added line of the mutant table or the killers
// table, and the mutant it names: `+	{"M1", ...` or `+	"M1": ...`.
var tableID = regexp.MustCompile(`(?m)^\+\s*\{?"([A-Z]+[0-9]+[a-z]?)"[,:]`)

// git runs git in dir and returns its output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w (%s)", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
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
