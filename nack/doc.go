// Package nack decides how a delivery ends, and how often a failing provider
// may be tried again.
//
// Invariant: every Outcome maps to exactly one Action, and no Action loses a
// message: Ack only for a message that was sent, expired or already sent;
// DeadLetter (publish to the dead-letter topic, then ack) only for a message
// that can never be sent; Nack, so that Pub/Sub delivers it again, for every
// outcome that may turn out differently later, including any Outcome this
// package does not know. The package decides only: it never sends, publishes,
// acks or nacks, and never sleeps.
//
// Retry policy lives in one layer, Pub/Sub redelivery (docs/decisions.md,
// "Retry in one layer").
// Budget applies the gRPC A6 retryThrottling rule to that layer, so that a
// provider outage does not multiply the load on the provider; FullJitter
// spreads waits uniformly so that many processes do not retry in step.
package nack
