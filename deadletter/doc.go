// Package deadletter is the dead letter's format, and what an operator
// does with the dead letters people inspect (docs/contract.md section 1):
// the dispatcher writes a dead letter with New, Parse reads one, List lists
// the inspect subscription and Replay republishes the letters whose cause
// is fixed. Each returns what it found; the commands print it.
//
// Invariant: the attributes of a dead letter are written and read here
// only (their names are internal/attr's, which the dispatcher reads too). List consumes no dead letter: every one it reads is held under
// a lease and given back (a nack) at the end. Replay acks a dead letter only
// once its republish is confirmed, or once its id's send-once record says
// it was sent, and clears an id's record only when it says the provider
// refused it: whatever step the process dies at, no dead letter is lost
// (an unacked one comes back when its lease runs out) and no id is sent
// twice.
//
// One concept per file: format.go (the writer, the reader), subscription.go (reading the inspect subscription: leases,
// acks, nacks), filter.go (the selection both commands share), list.go
// (listing and its output), replay.go (the replay policy) and result.go
// (what replay did with each dead letter).
package deadletter
