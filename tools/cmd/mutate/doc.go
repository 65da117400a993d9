// Command mutate proves that the tests guard each safety mechanism: it
// breaks the mechanisms one at a time in a copy of the module, runs the
// tests of the package whose tests guard the mechanism (the mutant's Pkg:
// admission unless it names another, such as dispatch, config or
// telemetry) against it, and fails unless every mutant is killed.
//
// Usage (with the Redis variables of .ci/redis.sh set):
//
//	go -C tools run ./cmd/mutate [-run REGEXP] [-v] [-no-baseline] [-j N]
//	go -C tools run ./cmd/mutate -shard I/N [-changed REV] ...
//
// -shard runs a sample: of the mutants -run selects, every Nth from the
// Ith, and with -changed every mutant a change since the git revision REV
// touches (the file it breaks, the file of its killer, or its line in the
// mutant or killers table). .ci/run runs a
// different sixth at each commit, with the commit's own changes;
// .ci/mutate runs the whole table.
//
// Before any mutant, the killers run once on the module as it is: a killer
// that fails without its mutant would otherwise kill it (-no-baseline
// skips that, for a caller that has just run every test, as .ci/run does).
// Each mutant first runs the test known to kill it (the killers table),
// alone; if that test passes, the whole package runs. Each line of output
// names a mutant and either the test that killed it or SURVIVED, and what
// the mutant cost: its time, the CPU time of everything it ran (compiler,
// linker, tests) and the time its tests ran (the rest is the build); the
// last line sums them. The tests build once, before the first mutant,
// with -race, -trimpath and -vet=off: every copy of the module shares
// those builds, and so do .ci/run's vet and test steps, which build with
// -race and -trimpath too, so that after them the check builds only its
// test binaries and what each mutant changed. A mutant of admission's or
// the ledger's scripts alone runs the package's test binary of that first
// build as it is, on a copy of the scripts it reads instead of the
// embedded ones (admission/mutate_test.go). A
// mutation whose text is not found exactly once is an error: the mutant
// table has drifted from the code.
//
// A mutant's file and package paths are relative to the product's root
// (the directory of the go.mod of module smsdispatcher at or above the
// working directory), so it runs from tools/ (`go -C tools run ./cmd/mutate`
// from the root) and copies the product's module alone (not the nested
// tools and k8s modules).
//
// It is a command of the tools module because the check is tooling, not
// part of any production room of docs/design.md ("Which package owns
// what").
package main
