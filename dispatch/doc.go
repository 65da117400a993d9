// Package dispatch is the per-message pipeline and the pool's lifecycle:
// it pulls each class's lane from Pub/Sub and takes every message to
// exactly one end.
//
// Invariant: a message is acknowledged only once it was sent, expired, found
// already sent, or published to the dead-letter topic; everything else is
// nacked, so a crash or a shutdown never loses an acknowledged message. No
// message is sent without a slot from the Limiter, none waits for one beyond
// its class's max wait, and a denial or a 429 ends in a nack, never in a
// sleep loop.
//
// Per message, in order (pipeline.go, one function a step, each returning
// what it came to): decode and validate; join the id's flight in this
// process (a duplicate waits for the first copy's end); deadline; send-once
// claim across processes; priority gate (the first class before the
// others); admission; provider send; judge the answer (nack.Judge: 429
// penalty, retry budget);
// the action nack.ActionFor gives the outcome (ack, nack, dead-letter); and
// the id's record (sent, refused, rejected), which, with receipts on, keeps
// the message's story for its delivery receipts (settle.go, top-down); a
// resend after a failed delivery is routed around the accounts that sent
// it (resend.go). What a class is owed (failover, hedge, the gate, the
// send without a record, the resend) is its Lane.Policy, computed by
// config/policy: dispatch never compares a class's name or position.
// dispatcher.go holds the Dispatcher and Run, lane.go each class's Receive
// loop. dispatch knows no Lua, no HTTP status code and no OTel: those live
// in admission, provider and nack, and behind Observer.
package dispatch
