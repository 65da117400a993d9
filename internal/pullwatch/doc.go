// Package pullwatch watches a Pub/Sub client's streaming pulls, which
// pubsub.Subscriber does not show: its Receive retries an unreachable
// Pub/Sub for ever without returning.
//
// Invariant: a subscription is silent (Watch.Silent) only when Pub/Sub
// has given no answer that counts for Silence: a fresh stream, an idle
// stream whose pings are answered, and a lane that holds its pulls itself
// are never silent; streams opened after one failed count only once
// Pub/Sub answers on one. A Watch sees the streams as a gRPC interceptor
// (Watch.DialOption), keyed by the subscription's full name.
package pullwatch
