// Package priority serves each class before the classes after it inside
// one process (OTP before marketing, with the default classes).
//
// Invariant: while a message of a class is waiting in this process
// (between Gate.Enter and its release), no message of a later class passes
// the gate; and the first class never waits at the gate. A message that
// passed before the earlier one arrived is not called back: the ceilings
// and reserves in admission keep room for the earlier classes on the
// account, and this gate keeps the later classes from taking the slots
// this process could give to an earlier one.
//
// The gate is local and makes no network call; it never calls Redis. It
// never polls: a blocked message wakes when an earlier class's last
// waiting message is released or when its context ends.
package priority
