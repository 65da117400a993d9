// Package deferral holds the messages a class may not send now: outside
// its recipient's send window (package window) or over its per-recipient
// cap. It judges a message before its admission (Judge), keeps a deferred
// one in Redis, and releases it when due by publishing it again to its
// class's topic (Releaser), where it passes the limiter, the send-once
// record and every other check as a new delivery.
//
// Invariants (docs/windows.md):
//   - a deferred message is stored before its delivery is acked: Judge
//     returns Deferred only once the store holds it, and the caller acks
//     only then;
//   - a release claims its ids for a lease (ClaimLease) and removes them
//     only after Pub/Sub confirmed their republish: a releaser killed in
//     between leaves them due again at the lease's end, for any process;
//     a double release is harmless, the id's send-once record holds;
//   - a new deferral of an id cancels a release's claim on it, so the
//     remove after a republish never erases a deferral made since;
//   - the cap counts places by id in a sliding window, exact across
//     processes (one script on the number's key): at most Count places in
//     any window of Per; a place taken by a delivery that was not handed
//     to a provider is given back;
//   - a message whose deadline comes before its release is never sent:
//     it ends expired; the release spread never pushes a release past
//     the deadline of a message whose window opens before it;
//   - an operator's early release passes a message's window once, never
//     its cap;
//   - a deferral leaves a trace (when, until when, why, how it ended)
//     that outlives its end by TraceKeep, for dispatcher message;
//   - no script reads a whole set: claims and lists go by pages.
package deferral
