// Package attr names the Pub/Sub attributes that the dispatcher writes
// and the receipts and the dead letters' commands read, or the other way
// round: a resend's, and a dead letter's (docs/contract.md section 2,
// docs/operating.md "Dead letters").
//
// Invariant: an attribute's name is written here once, and each side
// imports it from here rather than from the other side's package, so
// that receipts need not import dispatch, nor deadletter dispatch.
package attr

import "time"

// A resend's attributes: a first-class message whose final receipt says
// it did not arrive, published again on its class's topic.
const (
	// ResendAvoid names the accounts a resend must not go through,
	// comma-separated: those that sent it before.
	ResendAvoid = "sms-resend-avoid"
	// ResendReason is why it is sent again: the final status, then the
	// provider's error code when there is one ("undelivered 30007").
	ResendReason = "sms-resend-reason"
)

// ResendWithin is how long after its acceptance a message without a
// deadline may still be resent: past it, a login code is stale.
const ResendWithin = 5 * time.Minute

// A dead letter's attributes, which the dispatcher sets over the
// producer's.
const (
	// RejectReason says why the message will never be sent.
	RejectReason = "reject_reason"
	// Class is the message's class: otp or marketing.
	Class = "class"
	// OriginalMessageID is the Pub/Sub message ID of the original, which
	// stands in for the id of a message whose data has none.
	OriginalMessageID = "original_message_id"
	// OriginalDataBytes is set on a dead letter whose data was cut: the
	// size of the data the producer sent.
	OriginalDataBytes = "original_data_bytes"
)

// Replays counts the replays of a message: deadletter's Replay sets it on
// what it republishes, and a dead letter keeps it as one of the
// producer's attributes.
const Replays = "replays"

// PubSubPrefix starts the attributes Pub/Sub adds to a message its
// subscription's dead-letter policy forwards
// (CloudPubSubDeadLetterSourceSubscription, ...).
const PubSubPrefix = "CloudPubSubDeadLetter"
