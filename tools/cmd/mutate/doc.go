// Command mutate proves that the tests guard each safety mechanism: it
// breaks the mechanisms one at a time in a copy of the module, runs the
// tests of the package whose tests guard the mechanism (the mutant's Pkg:
// admission unless it names another, such as dispatch, config or
// telemetry) against it, and fails unless every mutant is killed.
//
// Usage (with the Redis variables of .ci/redis.sh set):
//
//	go -C tools run ./cmd/mutate [-run REGEXP] [-v] [-no-baseline] [-j N]
//
// Before any mutant, the killers run once on the module as it is: a killer
// that fails without its mutant would otherwise kill it (-no-baseline
// skips that, for a caller that has just run every test, as .ci/run does).
// Each mutant first runs the test known to kill it (the killers table),
// alone; if that test passes, the whole package runs. Each line of output
// names a mutant and either the test that killed it or SURVIVED, and the
// time the mutant took. The tests build with -trimpath, once before the
// first mutant, so that every copy of the module shares their builds; a
// mutant of admission's scripts alone runs the package's tests unbuilt,
// on a copy of the scripts they read instead of the embedded ones
// (admission/mutate_test.go). A mutation whose text is not found exactly
// once is an error: the mutant table has drifted from the code.
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
