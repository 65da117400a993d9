// Package wire holds the facts of the providers' APIs that both sides of a
// request read: the adapters of package provider, which send, and the
// simulators of package providertest, which answer: Twilio's error codes
// with how Twilio answers each and what each means, the bounds of Twilio's
// and Vonage's fields, the digit check their numbers and codes share, and
// the decimal seconds of a Retry-After that ParseRetryAfter reads.
//
// Invariant: each such rule is written once, here, so that an adapter and
// the simulator it is tested against cannot drift apart. The package is
// internal to provider: it is no part of the API an adapter's user sees.
package wire
