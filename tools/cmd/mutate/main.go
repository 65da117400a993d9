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
	shard := flag.String("shard", "", "I/N: of the mutants -run selects, only every Nth from the Ith (0 ≤ I < N), plus those -changed selects")
	changed := flag.String("changed", "", "with -shard: also the mutants a change since this git revision touches (the file a mutant edits, its killer's file, or its line in the mutant or killers table)")
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
	if *shard != "" {
		if selected, err = sample(root, selected, *shard, *changed); err != nil {
			return err
		}
	} else if *changed != "" {
		return fmt.Errorf("-changed needs -shard")
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
	// same time. Their test binaries are kept in bins: a mutant of scripts
	// alone runs its package's binary as it is.
	bins, err := os.MkdirTemp("", "mutants-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bins)
	if err := prebuild(dirs[0], bins, selected); err != nil {
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
				r := try(root, dir, bins, selected[i])
				r.took = time.Since(start)
				results[i] <- r
			}
		})
	}
	defer wg.Wait()
	defer close(stop) // before the wait: the workers take no new mutant
	survived := 0
	var sum result
	for i, m := range selected {
		r := <-results[i]
		if r.err != nil {
			return fmt.Errorf("%s %s: %w", m.ID, m.Name, r.err)
		}
		if *verbose {
			fmt.Println(r.out)
		}
		sum.took, sum.cpu, sum.tests = sum.took+r.took, sum.cpu+r.cpu, sum.tests+r.tests
		if r.killer == "" {
			survived++
			fmt.Printf("%-4s %-56s SURVIVED (%s)\n", m.ID, m.Name, r.times())
		} else {
			fmt.Printf("%-4s %-56s killed by %s (%s)\n", m.ID, m.Name, r.killer, r.times())
		}
	}
	fmt.Printf("%d/%d mutants killed (summed over the mutants: %s)\n", total-survived, total, sum.times())
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
		var r result
		goTest(&r, root, nil, "", pkg, "-run", "^("+strings.Join(byPkg[pkg], "|")+")$")
		if r.err != nil || r.killer != "" {
			return fmt.Errorf("baseline: the killers of %s must pass before any mutant (%s failed):\n%s", pkg, r.killer, r.out)
		}
	}
	return nil
}

// result is what try found for one mutant, and what it cost: its wall
// time, the CPU time (user and system) of the commands it ran with all
// they ran (go test's compiler, linker and test binary, or a prebuilt
// test binary), and the time its test binaries ran, as go test reports
// it or as measured around a prebuilt one (the rest of the wall time is
// the build).
type result struct {
	killer, out string
	err         error
	took        time.Duration
	cpu, tests  time.Duration
}

// add counts the cost of one go test command of the mutant's.
func (r *result) add(cmd *exec.Cmd, out string) {
	if s := cmd.ProcessState; s != nil {
		r.cpu += s.UserTime() + s.SystemTime()
	}
	for _, m := range testTime.FindAllStringSubmatch(out, -1) {
		if d, err := time.ParseDuration(m[1] + "s"); err == nil {
			r.tests += d
		}
	}
}

func (r result) times() string {
	round := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	return fmt.Sprintf("%v, CPU %v, tests %v", round(r.took), round(r.cpu), round(r.tests))
}

// testTime matches go test's line for a package's test binary: its time.
var testTime = regexp.MustCompile(`(?m)^(?:ok|FAIL)\s+\S+\s+([0-9.]+)s`)

var failLine = regexp.MustCompile(`^\s*--- FAIL: (\S+)`)

// try applies m to dir, a copy of the module at root, runs the tests of
// m's package, and puts back the files it edited. It returns the first
// failing test, or "" if every test passed.
//
// A mutant of one package's scripts alone (admission's, the ledger's) is
// applied beside dir instead, to a copy of the scripts in dir+"-scripts"
// that the package's tests read (its mutate_test.go): the package's test
// binary, unchanged, is the one prebuild left in bins, run as it is,
// without a build or a link for each such mutant.
func try(root, dir, bins string, m mutant) (r result) {
	edited, env, bin := dir, []string(nil), ""
	if pkg, ok := m.scriptsOnly(); ok {
		edited, bin = dir+"-scripts", filepath.Join(bins, testBinary(pkg))
		env = []string{"SMS_MUTATE_SCRIPTS=" + filepath.Join(edited, pkg)}
		if err := copyScripts(root, edited, pkg); err != nil {
			return result{err: err}
		}
	}
	defer func() {
		for _, e := range m.Edits {
			if restoreErr := copyFile(filepath.Join(root, e.File), filepath.Join(edited, e.File)); restoreErr != nil && r.err == nil {
				r.err = restoreErr
			}
		}
	}()
	for _, e := range m.Edits {
		if err := apply(filepath.Join(edited, e.File), e); err != nil {
			return result{err: err}
		}
	}
	// The test known to kill the mutant goes first, alone: most mutants
	// die in seconds instead of a whole package's run. If it passes, the
	// table's expectation is stale and the whole package decides.
	if k := killers[m.ID]; k != "" {
		goTest(&r, dir, env, bin, m.pkg(), "-run", "^"+k+"$")
		if r.err != nil || r.killer != "" {
			return r
		}
	}
	goTest(&r, dir, env, bin, m.pkg(), "-failfast")
	return r
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

// prebuild builds the tests of the mutants' packages in dir, running
// none, and writes their test binaries to bins (testBinary names them).
func prebuild(dir, bins string, selected []mutant) error {
	args := append([]string{"test", "-c", "-o", bins + string(filepath.Separator)}, buildFlags...)
	for _, m := range selected {
		if !slices.Contains(args, m.pkg()) {
			args = append(args, m.pkg())
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the tests: %w\n%s", err, out)
	}
	r := result{took: time.Since(start)}
	r.add(cmd, "")
	fmt.Printf("tests built in %s\n", r.times())
	return nil
}

// testBinary is the name go test -c -o DIR/ gives the test binary of pkg.
func testBinary(pkg string) string {
	return filepath.Base(filepath.Clean(pkg)) + ".test"
}

// buildFlags are those of every build of the check. -race and -trimpath:
// the flags .ci/run vets and tests the modules with, so that every
// package a mutant leaves alone, and every dependency, is already in the
// build cache (-trimpath: see prebuild too; a killer runs as the test
// step ran it). -vet=off: a mutant is killed by a failing test, never by vet
// (a mutant vet rejects would fail without a failing test: an error), and
// .ci/run's go vet step has vetted the module as it is. -ldflags=-w: no
// DWARF in the test binaries (nobody debugs a mutant; a panic's trace
// still names its lines), about a second less of each mutant's link.
var buildFlags = []string{"-race", "-trimpath", "-vet=off", "-ldflags=-w"}

// goTest runs the tests of pkg in dir, the module's copy, and sets r's
// killer to the first failing test, or "" if every test passed, and its
// output; it adds the run's cost to r's. flags are go test's -run and
// -failfast. With bin, the package's test binary, it runs that in the
// package's directory, as go test would; without, go test builds the
// tests with the flags prebuild built with.
func goTest(r *result, dir string, env []string, bin, pkg string, flags ...string) {
	var cmd *exec.Cmd
	if bin != "" {
		args := []string{"-test.count=1", "-test.timeout=10m0s", "-test.paniconexit0"}
		for _, f := range flags {
			if strings.HasPrefix(f, "-") {
				f = "-test." + f[1:]
			}
			args = append(args, f)
		}
		cmd = exec.Command(bin, args...)
		cmd.Dir = filepath.Join(dir, pkg)
	} else {
		cmd = exec.Command("go", slices.Concat([]string{"test", "-count=1"}, buildFlags, flags, []string{pkg})...)
		cmd.Dir = dir
	}
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	runErr := cmd.Run()
	r.out, r.killer = buf.String(), ""
	r.add(cmd, r.out)
	if bin != "" {
		r.tests += time.Since(start)
	}
	if runErr == nil {
		return
	}
	sc := bufio.NewScanner(strings.NewReader(r.out))
	for sc.Scan() {
		if f := failLine.FindStringSubmatch(sc.Text()); f != nil {
			// Prefer the top-level test: subtests print first.
			r.killer = strings.SplitN(f[1], "/", 2)[0]
		}
	}
	if r.killer == "" {
		// A mutant that does not build, or a test binary that crashed,
		// says the table is wrong, not that a test caught the bug.
		r.err = fmt.Errorf("tests failed without a failing test:\n%s", r.out)
	}
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
