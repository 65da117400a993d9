// Package sleep waits for a duration that a context can cut short, for the
// simulators' latency and the load harness's spinning senders.
//
// Invariant: For returns once d has passed or ctx has ended, whichever is
// first, and leaves no timer or goroutine behind.
package sleep
