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
// logs holds a credential, a phone number or a message body. A delivery
// receipt (ReadReceipt) is verified against the provider's signature
// before any of its fields is read, and what it reports is always one of
// the 11 DeliveryStatus values with a bounded, printable id. Each answer's
// meaning is also left in a Report for the HTTP client's instruments, so
// that a throttle in a 200 body (Vonage) counts as a 429 there too.
//
// The simulators that play each provider's side against these adapters
// are in package providertest, beside this one as httptest is beside
// net/http; this package ships none. What both sides must read alike
// (Twilio's error codes, the bounds of Twilio's and Vonage's fields, the
// Retry-After the simulators write) is in internal/wire, written once.
//
// One file per concept: client.go (Client, Message, the shared
// connection), error.go (Error and the Kind of an answer), twilio.go and
// vonage.go (their adapters), secret.go (a credential read again from its
// file), receipt.go (DeliveryStatus, DeliveryReport, ReceiptReader) with
// receipt_client.go, receipt_twilio.go and receipt_vonage.go (each
// provider's receipt, verified and read), route.go (the error codes that
// say a message's route failed, per provider), segments.go (Segments,
// UCS2Segments), context.go (the resend
// count and the Report), redact.go (what of an answer may go into
// Error.Message) and retryafter.go (ParseRetryAfter).
package provider
