// Package localstack is everything a dispatcher needs, on this machine: an
// in-process Pub/Sub (pstest) that holds a nacked message as the real
// service does, Redis (miniredis, unless a real one is named) and the
// provider simulator behind an HTTP server. `dispatcher demo` runs on it,
// and so do the alert recorder's fault runs (tools/internal/alertrecord),
// with a real Redis.
//
// Invariant: a Stack's Pub/Sub redelivers a nacked message of a subscription
// given a delay no sooner than that delay, and Close stops every server and
// goroutine Start started. The package is for development and measuring
// only: the dispatcher links it under the !nodemo build tag, so the image
// (built with -tags nodemo) holds no pstest, miniredis or httptest.
package localstack
