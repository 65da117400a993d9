// Package provider talks to the SMS provider: one HTTP request per Send,
// never more, and an answer the caller can branch on without reading HTTP.
// Three adapters share that contract: Client (the generic JSON API of
// docs/contract.md section 3), Twilio and Vonage (docs/providers.md).
//
// Invariant: a Send makes at most one request that the provider can have
// processed (it never retries, never sleeps, never replays a request that
// may have reached the provider), and returns exactly one of a Receipt
// (accepted, with the provider's message id), an *Error whose Kind says
// what the answer meant (throttled, refused, account failure, temporary),
// or a wrapped transport or context error; no error it returns or value it
// logs holds a credential, a phone number or a message body. Each answer's
// meaning is also left in a Report for the HTTP client's instruments, so
// that a throttle in a 200 body (Vonage) counts as a 429 there too.
//
// The package also holds a Simulator per provider: an http.Handler that
// enforces the provider's side (request shape, credentials, a rate limit
// over a strict sliding or a fixed window, in messages or segments, and
// optionally one per sender, throttles in the provider's own form,
// suspension after too many) and records every arrival, so that tests, the
// local demo and load runs can check the dispatcher against a provider
// that does not forgive. MaxInAnyWindow measures a list of arrival times
// the way the contract does: any window of a given length, at any phase;
// MaxInWindow measures a Simulator's accepted arrivals the same way, for
// the account or for each sender.
//
// One file per concept: client.go (Client, Error, Message, the shared
// connection), twilio.go and vonage.go (their adapters), secret.go (a
// credential read again from its file), segments.go (Segments),
// context.go (the resend count and the Report), redact.go (what of an
// answer may go into Error.Message), retryafter.go (ParseRetryAfter),
// simulator.go (the Simulator's core and the generic API), twiliosim.go
// and vonagesim.go (their APIs), window.go (MaxInAnyWindow, MaxInWindow)
// and ring.go (the bounded FIFO the simulators' windows use).
package provider
