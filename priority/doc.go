// Package priority serves OTP before marketing inside one process.
//
// Invariant: while an OTP message is waiting in this process (between
// Gate.EnterOTP and its release), no marketing message passes the gate; and
// OTP never waits at the gate. A marketing message that passed before the OTP
// arrived is not called back: the marketing cap in admission keeps room for
// OTP on the account, and this gate keeps marketing from taking the slots
// this process could give to OTP.
//
// The gate is local and makes no network call; it never calls Redis. It
// never polls: a blocked marketing message wakes when the last waiting OTP
// is released or when its context ends.
package priority
