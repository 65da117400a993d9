// Package providertest plays the SMS provider's side for tests, the local
// demo and load runs, as httptest plays a server's: a Simulator per
// provider (NewGeneric for the generic API of docs/contract.md section 3,
// NewTwilio, NewVonage), an http.Handler that enforces what the provider
// enforces (request shape, credentials, a rate limit over a strict sliding
// or a fixed window, in messages or segments, and optionally one per
// sender, throttles in the provider's own form, suspension after too many)
// and records every arrival. A send that names a callback URL gets
// delivery receipts posted to it, in the provider's own shape and
// signature (ReceiptConfig): a delivered share per destination prefix,
// latency, intermediate statuses, duplicates, out-of-order and forged
// receipts, as a test asks. Close stops the posting.
//
// Invariant: a Simulator never forgives what its provider would not. No
// acceptance takes the account past Config.Limit in any window of
// Config.Window (sliding, or the fixed window it falls in) or a sender
// past Config.SenderLimit, and every request is counted in exactly one of
// the Stats' outcomes. It reads the providers' rules (the segment count,
// Twilio's error codes, the bounds of the fields) from package provider
// and its internal wire package, the same ones the adapters read, never a
// copy. No Arrival holds a recipient's number or a message body. The
// receipts' signatures are the exception to reading package provider:
// they are written here from the providers' documents, so that the
// adapters' verifiers are checked against a second implementation. A
// message's receipts go out one after another in the planned order, each
// done receipt is counted once in ReceiptStats (posted, given up after its
// retries, or dropped), and once Close returns no goroutine of the
// Simulator is left.
//
// MaxInAnyWindow measures a list of times the way the contract does: any
// window of a given length, at any phase; MaxInWindow measures a
// Simulator's accepted arrivals the same way, for the account or for each
// sender.
//
// One file per concept: simulator.go (the Simulator's core: options,
// faults, the decision), config.go (Config, Arrival, Stats), generic.go,
// twilio.go and vonage.go (each provider's wire format), receipts.go
// (ReceiptConfig, the plan of a message's receipts, their counts),
// receiptwire.go (each provider's receipt and its signature), poster.go
// (the goroutines that post them), window.go (MaxInAnyWindow, Window,
// MaxInWindow) and ring.go (the bounded FIFO the windows use). The
// production binary links none of it.
package providertest
