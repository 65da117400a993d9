// Package provider talks to the SMS provider: one HTTP request per Send,
// never more, and an answer the caller can branch on without reading HTTP.
//
// Invariant: a Client.Send makes at most one request that the provider can
// have processed (it never retries, never sleeps, never replays a request
// that may have reached the provider), and returns exactly one of nil (2xx:
// accepted), an *Error carrying the provider's status and, for 429, its
// Retry-After, or a wrapped transport or context error; no error it returns
// or value it logs holds the token, a phone number or a message body.
//
// The package also holds a Simulator: an http.Handler that enforces the
// provider's side of docs/contract.md section 3 (request shape, bearer token, a
// rate limit over a strict sliding or a fixed window, 429 with Retry-After,
// suspension after too many 429s) and records every arrival, so that tests,
// the local demo and load runs can check the dispatcher against a provider
// that does not forgive. MaxInAnyWindow measures a list of arrival times the
// way the contract does: any window of a given length, at any phase.
//
// One file per concept: client.go (Client, Error, Message), redact.go (what
// of an answer may go into Error.Message), retryafter.go (ParseRetryAfter),
// simulator.go (Simulator), window.go (MaxInAnyWindow) and ring.go (the
// bounded FIFO the simulator's windows use).
package provider
