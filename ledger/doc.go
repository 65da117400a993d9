// Package ledger keeps, in Redis, what happened to each message an
// account sent: the send-once record's forms (Record, SentRecord,
// RefusedRecord), the message's story (kept by the send's settle,
// admission.Limiter.Settle, and read by `dispatcher message`), its
// delivery receipts folded into it, the status events owed for it, and
// the account's delivery statistics.
//
// Invariant: a sent message's delivery receipts fold into one state per
// message, in one script call each (receipt.lua): a final state is never
// replaced by an intermediate one, nor by a later final other than
// delivered, so that duplicated and reordered receipts end the same; a
// status event owed for it stays owed until its publication is noted
// (EventPublished) and cleared; and a first-class message's resend
// payload is handed out once (given back only when its publish failed:
// giveback.lua). Every key is under the account's hash tag
// {sms:<account>} (package internal/keys builds the names), in the slot
// of the admission script's keys.
//
// One concept per file: record.go (what an id's record says), story.go
// (a message's story as `dispatcher message` reads it, and the delivery
// statistics), receipt.go (a receipt folded, its owed event, its resend
// given back), counts.go (the delivery counts a process keeps and writes
// once a second), calls.go (each script's KEYS and ARGV as a struct) and
// scripts.go (the scripts: receipt.lua and story.lua composed of parts in
// receipt/ and story/ by internal/luapart, delivery.lua, giveback.lua).
//
// It must not decide an admission or know a rate: the admission script
// and the settle's lease and health are package admission's, which
// builds each account's Ledger (Limiter.Ledger) on its circuit.
package ledger
