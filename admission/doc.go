// Package admission decides, for every process that sends on one SMS
// account, whether a message may go to the provider now.
//
// Invariant: across all processes sharing a Redis, admissions on the account
// never exceed Config.TargetRPS plus Config.Burst in any window, measured by
// Redis's own clock; each class (Config.Classes, in priority order: OTP then
// marketing by default) never exceeds its ceiling, and the classes after
// each class never exceed TargetRPS minus its reserve, so the earlier
// classes always have room; and while a 429 penalty is live nothing is
// admitted.
// With a sender pool (Config.Senders) no sender carries more than its RPS
// in any second as the provider sees it; with Config.Adaptive the rates
// in force are at most the configured ones, lowered by what the provider's
// 429s taught (learned.go).
//
// What happened to each sent message (its story, its receipts folded,
// the events owed, the delivery statistics) is package ledger's: a
// Limiter builds its account's Ledger on its circuit (Limiter.Ledger),
// and its Settle keeps the story the ledger reads.
//
// Each decision is one Lua script call (the admission script, composed of
// parts: compose.go, admit/): the penalty key is checked
// first, then GCRA on the global key and on the levels of the caller's
// class (its ceiling, the reserves of the classes before it: classes.go);
// a denial advances no TAT. All keys of an account share the hash tag
// {sms:<account>} so the script runs on Redis Cluster; package
// internal/keys builds every name.
//
// When Redis fails or times out (or, full under noeviction, refuses a
// script: memory.go), a Limiter decides locally at
// TargetRPS/MaxSenders (each level of a class at its rate/MaxSenders) and leaves Redis
// alone for Config.RedisRetryAfter before trying it again: never fail open,
// never stop. Each process admits at most one message at a time in fallback,
// so all processes together stay at TargetRPS over any second; a window
// shorter than one fallback interval may see up to MaxSenders messages if
// every process happens to send at the same instant (the start of each
// process's fallback is jittered to make that unlikely).
//
// One concept per file: limiter.go (the Limiter and one decision),
// acquire.go (waiting for a slot), eval.go (an admission script call and its reply),
// compose.go (the admission script composed of its parts), rewrite.go
// (the reply's and reasons' tables, a part's source rewritten before it
// is composed), variant.go (a composed script's layout and cache), parts.go
// (finish.lua composed of its parts, finish/), penalty.go (a 429 for every
// process), stops.go (the penalty, pause and fallback this process knows
// of, as pure transitions at given instants), override.go (an operator's
// override), learned.go (the learned rate, as read, pinned and reset),
// lease.go (in-flight leases), fallback.go (deciding without Redis),
// circuit.go (Redis's health), claim.go (send-once claims), memory.go
// (Redis's maxmemory-policy), settle.go (the one call after a send, and
// the story it keeps), route.go (a first-class route to a destination
// prefix skipped while its messages do not arrive), calls.go (each
// script's KEYS and ARGV as a struct) and scripts.go (the scripts and
// their operation names). The process registry, the heartbeats and the
// read of an account's state for `dispatcher status` are package
// status's: it reads what a Limiter knows (State, AccountPause, Health)
// and runs its own scripts.
package admission
