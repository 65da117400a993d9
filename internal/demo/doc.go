// Package demo is `dispatcher demo`: the real pipeline on one machine.
// Several server.Server instances (each with its own Redis client and
// limiters, as pods) run on internal/localstack's in-process Pub/Sub,
// Redis (miniredis, or REDIS_URL's) and provider simulator, while a
// campaign and a stream of OTPs (with three classes, transactional
// messages too) are published; Run returns a Report of
// what the provider accepted, the waits, and the cost in Redis commands
// and Pub/Sub deliveries.
//
// Invariant: Run ends every instance and closes every client and the
// stack before it returns, whatever happens; its messages carry ids of
// that run alone, so a Redis kept from an earlier run finds none of them
// sent. The dispatcher's image (-tags nodemo) does not link this package.
//
// Files: demo.go (Options and Run), produce.go (the campaign and the
// OTPs), stats.go (what the instances' events and Redis clients count),
// report.go (the Report and its text), stack.go (the settings pointed at
// the local stack), classes.go (the three classes of --classes 3:
// otp, transactional, marketing), quiet.go (the send windows of
// --quiet-hours), optouts.go (the recipients who reply STOP mid-run, and
// the second account half of them are sent through).
package demo
