package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run() error {
	only := flag.String("run", "", "run only the mutants whose ID or name matches this regexp")
	verbose := flag.Bool("v", false, "print the test output of every mutant")
	check := flag.Bool("check", false, "only check that every mutation applies (no tests)")
	jobs := flag.Int("j", 1, "mutants tried at once, each in its own copy of the module: most killers wait on Redis, timers or a child process more than they compute")
	noBaseline := flag.Bool("no-baseline", false,
		"skip the run of the killers on the unmutated module: for a caller that has just run every test and stops on a failure (.ci/run)")
	flag.Parse()
	var match *regexp.Regexp
	if *only != "" {
		var err error
		if match, err = regexp.Compile(*only); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}

	root, err := productRoot()
	if err != nil {
		return err
	}

	if !*check && !*noBaseline {
		if err := baseline(root, match); err != nil {
			return err
		}
	}
	var selected []mutant
	for _, m := range mutants {
		if match == nil || match.MatchString(m.ID) || match.MatchString(m.Name) {
			selected = append(selected, m)
		}
	}
	total := len(selected)
	if *check {
		for _, m := range selected {
			for _, e := range m.Edits {
				b, err := os.ReadFile(filepath.Join(root, e.File))
				if err != nil {
					return err
				}
				if n := strings.Count(string(b), e.Old); n != 1 {
					return fmt.Errorf("%s %s: %s: the text to mutate occurs %d times, want 1", m.ID, m.Name, e.File, n)
				}
			}
		}
		fmt.Printf("%d mutants apply\n", total)
		return nil
	}
	// One copy of the module per worker, each mutant's edits undone after
	// it: the packages a mutant leaves alone keep their path and their
	// content, so the build cache holds them, and each mutant compiles
	// only what it changed and what depends on it.
	workers := max(1, min(*jobs, total))
	dirs := make([]string, workers)
	for i := range dirs {
		if dirs[i], err = os.MkdirTemp("", "mutants-"); err != nil {
			return err
		}
		defer os.RemoveAll(dirs[i])
		defer os.RemoveAll(dirs[i] + "-scripts")
		if err := copyTree(root, dirs[i]); err != nil {
			return fmt.Errorf("copy module: %w", err)
		}
	}
	// The selected mutants' packages and their tests are built once, before
	// the workers start: built with -trimpath, a package's build does not
	// name the copy it was built in, so every copy finds it in the build
	// cache, instead of each worker compiling the same dependencies at the
	// same time.
	if err := prebuild(dirs[0], selected); err != nil {
		return err
	}
	// Each worker takes the next mutant; the results are printed in the
	// table's order, each as soon as those before it are.
	results := make([]chan result, total)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	next := make(chan int, total)
	for i := range total {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	stop := make(chan struct{}) // closed on return: an error ends the run
	for _, dir := range dirs {
		wg.Go(func() {
			for i := range next {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				killer, out, err := try(root, dir, selected[i])
				results[i] <- result{killer, out, err, time.Since(start).Round(100 * time.Millisecond)}
			}
		})
	}
	defer wg.Wait()
	defer close(stop) // before the wait: the workers take no new mutant
	survived := 0
	for i, m := range selected {
		r := <-results[i]
		if r.err != nil {
			return fmt.Errorf("%s %s: %w", m.ID, m.Name, r.err)
		}
		if *verbose {
			fmt.Println(r.out)
		}
		if r.killer == "" {
			survived++
			fmt.Printf("%-4s %-56s SURVIVED (%v)\n", m.ID, m.Name, r.took)
		} else {
			fmt.Printf("%-4s %-56s killed by %s (%v)\n", m.ID, m.Name, r.killer, r.took)
		}
	}
	fmt.Printf("%d/%d mutants killed\n", total-survived, total)
	if survived > 0 {
		return fmt.Errorf("%d mutant(s) survived", survived)
	}
	return nil
}

// baseline runs the killers of the selected mutants once on the module as
// it is: a killer that fails without a mutant (a flaky test, a Redis not
// started) would otherwise "kill" every mutant it is named for.
func baseline(root string, match *regexp.Regexp) error {
	byPkg := map[string][]string{}
	for _, m := range mutants {
		if k := killers[m.ID]; k != "" && (match == nil || match.MatchString(m.ID) || match.MatchString(m.Name)) && !slices.Contains(byPkg[m.pkg()], k) {
			byPkg[m.pkg()] = append(byPkg[m.pkg()], k)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(byPkg)) {
		failed, out, err := goTest(root, nil, pkg, "-run", "^("+strings.Join(byPkg[pkg], "|")+")$")
		if err != nil || failed != "" {
			return fmt.Errorf("baseline: the killers of %s must pass before any mutant (%s failed):\n%s", pkg, failed, out)
		}
	}
	return nil
}

// result is what try found for one mutant, and how long it took.
type result struct {
	killer, out string
	err         error
	took        time.Duration
}

var failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)

// try applies m to dir, a copy of the module at root, runs the tests of
// m's package, and puts back the files it edited. It returns the first
// failing test, or "" if every test passed.
//
// A mutant of one package's scripts alone (admission's, the ledger's) is
// applied beside dir instead, to a copy of the scripts in dir+"-scripts"
// that the package's tests read (its mutate_test.go): the package's test
// binary, unchanged, comes from the build cache instead of a build for
// each such mutant.
func try(root, dir string, m mutant) (killer, output string, err error) {
	edited, env := dir, []string(nil)
	if pkg, ok := m.scriptsOnly(); ok {
		edited = dir + "-scripts"
		env = []string{"SMS_MUTATE_SCRIPTS=" + filepath.Join(edited, pkg)}
		if err := copyScripts(root, edited, pkg); err != nil {
			return "", "", err
		}
	}
	defer func() {
		for _, e := range m.Edits {
			if restoreErr := copyFile(filepath.Join(root, e.File), filepath.Join(edited, e.File)); restoreErr != nil && err == nil {
				err = restoreErr
			}
		}
	}()
	for _, e := range m.Edits {
		if err := apply(filepath.Join(edited, e.File), e); err != nil {
			return "", "", err
		}
	}
	// The test known to kill the mutant goes first, alone: most mutants
	// die in seconds instead of a whole package's run. If it passes, the
	// table's expectation is stale and the whole package decides.
	if k := killers[m.ID]; k != "" {
		if killer, out, err := goTest(dir, env, m.pkg(), "-run", "^"+k+"$"); err != nil || killer != "" {
			return killer, out, err
		}
	}
	return goTest(dir, env, m.pkg(), "-failfast")
}

// copyScripts copies the scripts of package pkg (a directory of the
// module at root) to dst/pkg, with the parts of the composed ones in its
// subdirectories, once per dst and pkg.
func copyScripts(root, dst, pkg string) error {
	if _, err := os.Stat(filepath.Join(dst, pkg)); err == nil {
		return nil
	}
	return filepath.WalkDir(filepath.Join(root, pkg), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".lua" {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
}

// prebuild builds the tests of the mutants' packages in dir, running none.
func prebuild(dir string, selected []mutant) error {
	args := []string{"test", "-trimpath", "-count=1", "-run", "^$"}
	for _, m := range selected {
		if !slices.Contains(args, m.pkg()) {
			args = append(args, m.pkg())
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the tests: %w\n%s", err, out)
	}
	return nil
}

// goTest runs go test on pkg in dir and returns the first failing test, or
// "" if every test passed. Built with -trimpath, as prebuild builds.
func goTest(dir string, env []string, pkg string, flags ...string) (killer, output string, err error) {
	cmd := exec.Command("go", append(append([]string{"test", "-trimpath", "-count=1"}, flags...), pkg)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	runErr := cmd.Run()
	out := buf.String()
	if runErr == nil {
		return "", out, nil
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := failLine.FindStringSubmatch(sc.Text()); f != nil {
			// Prefer the top-level test: subtests print first.
			killer = strings.SplitN(f[1], "/", 2)[0]
		}
	}
	if killer == "" {
		// A mutant that does not build, or a test binary that crashed,
		// says the table is wrong, not that a test caught the bug.
		return "", out, fmt.Errorf("tests failed without a failing test:\n%s", out)
	}
	return killer, out, nil
}

func apply(path string, e edit) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if n := strings.Count(string(b), e.Old); n != 1 {
		return fmt.Errorf("%s: the text to mutate occurs %d times, want 1: %q", e.File, n, e.Old)
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), e.Old, e.New, 1)), 0o644)
}

// copyTree copies the module's source files from src to dst: not .git, nor
// a nested module (a directory with a go.mod of its own, as tools/ and k8s/
// are), which no package of the module reads.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
