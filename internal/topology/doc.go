// Package topology is the dispatcher's side of Pub/Sub outside the
// per-message path: the client, the topics and subscriptions the
// dispatcher relies on, how `dispatcher setup` creates them and how
// `serve` checks them at start.
//
// Invariant: Setup is idempotent and leaves the subscriptions as the
// dispatcher needs them: an ack deadline longer than a message is held,
// the per-class retry policy (the one place a nack is delayed), a
// dead-letter policy whose limit is MaxDeliveryAttempts, and the
// dead-letter inspect subscription's retention as asked. A subscription's
// full name is SubscriptionName's everywhere (the check, Setup, the pull
// watch's keys).
package topology
