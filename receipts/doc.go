// Package receipts serves the providers' delivery receipts: one HTTP
// listener of its own (RECEIPTS_ADDR, reached from the internet), a path
// per account (POST /v1/receipts/<account>), each receipt verified by the
// account's adapter, folded into its message's state in Redis by the
// account's limiter, and each final state published to the status topic.
//
// Invariant: a receipt changes nothing until its account's adapter has
// verified it, and every final state recorded in Redis is published at
// least once. The fold records the state and marks its event owed in the
// same Redis call; the event is marked published only after Pub/Sub has
// answered, so a publish that fails leaves it owed: the process holds it
// and publishes it again each second and before Run returns, a final
// receipt of the message posted again publishes it, and the sweep (every
// 10 s, events owed for more than 30 s) is the last resort. Events are
// therefore at least once: a consumer may see one twice. A first-class
// message's resend is published before its status event, and at most
// once: the ledger hands it out once, a publish that fails gives it back
// for the next sweep, and one past its window (the deadline its data
// holds) is dropped. Its data holds the message's id, so the next
// account's send-once claim would send even a second copy once.
//
// Nothing of a request (number, body, token, signature) reaches a log or
// a metric: a metric's account is one of the configured names, its class
// and status come from the message's record.
//
// Files: server.go (the configuration, the HTTP server and Run),
// handler.go (one receipt, from the request to the answer), events.go
// (the status event, the resend and publishing them), sweep.go (the
// held and the owed events published again, the published ones cleared).
package receipts
