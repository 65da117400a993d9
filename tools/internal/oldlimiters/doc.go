// Package oldlimiters keeps the send limiters of the incident, flaws
// included, so that tools/cmd/loadtest can run them side by side with the real
// limiter (package admission) and show, by measurement, why they failed.
// The designs are those docs/design.md describes under "The incident it
// replaces": v1, v2 and the team's plan A.
//
// Invariant: each limiter does what the incident's code did and no better: v1
// counts locally per process, v2 reads then writes (it can over-admit), plan
// A counts atomically but in a fixed one-second window of the caller's
// clock, and v2 and plan A let everything through when Redis fails. None of
// them may limit a real send: only the load test's harness
// (tools/internal/loadharness) and this package's tests import it, and the
// dispatcher never does.
//
// Time is a parameter: every limiter decides with AllowAt(now), so callers
// choose each process's (possibly skewed) clock.
package oldlimiters
