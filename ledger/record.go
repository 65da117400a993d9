package ledger

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadReply reports a script's reply that is not of the shape its
// header gives.
var ErrBadReply = errors.New("admission: unexpected script reply")

// ClaimState is the state of a message id's send record.
type ClaimState int

const (
	// Claimed means the caller holds the claim and may send.
	Claimed ClaimState = iota
	// Held means another attempt holds a live claim: it may be sending now.
	Held
	// Finished means the id already has a final record (sent, or rejected
	// for good and dead-lettered): it must not be sent again.
	Finished
	// Refused means the provider refused the id for good but its dead
	// letter may not be published yet: dead-letter it with the recorded
	// reason, never send it again.
	Refused
	// Unrecorded means the id has no record. Forget and Recorded report it;
	// Claim takes the claim instead.
	Unrecorded
)

func (s ClaimState) String() string {
	return [...]string{"claimed", "held", "finished", "refused", "unrecorded"}[s]
}

// Record is what an id's send-once record says: what Claim found, or what
// Forget and Recorded read.
type Record struct {
	State ClaimState
	// Rejected is, when State is Finished, whether the record is
	// RecordRejected (refused, and dead-lettered) rather than a send's.
	Rejected bool
	// RejectReason is, when State is Refused, the refusal as recorded.
	RejectReason string
	// ProviderID is, when State is Finished by a send, the provider's id
	// of the message if it gave one.
	ProviderID string
}

// String returns the record as Redis keeps it: "" when there is none,
// "held" for another attempt's live claim, "claimed" for the caller's, else
// the final record (RecordSent, SentRecord's, RecordRejected) or a
// refusal's ("refused:<reason>").
func (r Record) String() string {
	switch r.State {
	case Claimed:
		return "claimed"
	case Held:
		return "held"
	case Finished:
		if r.Rejected {
			return RecordRejected
		}
		return SentRecord(r.ProviderID)
	case Refused:
		return refusedPrefix + r.RejectReason
	}
	return ""
}

// Final records of an id.
const (
	RecordSent     = "sent"
	RecordRejected = "rejected" // refused, and dead-lettered
)

// sentPrefix starts the record of a send the provider gave an id to.
const sentPrefix = RecordSent + ":"

// maxProviderID bounds the provider id kept in a record: providers' ids
// are short (Twilio's 34 characters), and a record is no place for more.
const maxProviderID = 128

// SentRecord is the final record of a send the provider accepted as
// providerID (RecordSent when it gave none), so that an operator finds the
// provider's message from the dispatcher's id.
func SentRecord(providerID string) string {
	if providerID == "" {
		return RecordSent
	}
	if len(providerID) > maxProviderID {
		providerID = providerID[:maxProviderID]
	}
	return sentPrefix + providerID
}

// refusedPrefix starts the record of a refusal whose dead letter is not
// published yet; the reason follows it.
const refusedPrefix = "refused:"

// RefusedRecord is the record of a provider's refusal whose dead letter is
// not published yet: a redelivery finds it (Record.State Refused) and is
// dead-lettered with reason, never sent again. Claims.Finish with
// RecordRejected follows once the dead letter is out.
func RefusedRecord(reason string) string { return refusedPrefix + reason }

// ResendID is the id a resend of message id keeps its send-once record
// under: apart from the original's, which, on the account that kept it,
// says sent and would make the resend a duplicate. Its story is id's.
func ResendID(id string) string { return id + "/resend" }

// ParseRecord reads an id's record that says not to send: "held" (another
// attempt's live claim) or a final record.
func ParseRecord(v string) (Record, error) {
	switch v {
	case "held":
		return Record{State: Held}, nil
	case RecordSent:
		return Record{State: Finished}, nil
	case RecordRejected:
		return Record{State: Finished, Rejected: true}, nil
	}
	if strings.HasPrefix(v, sentPrefix) {
		return Record{State: Finished, ProviderID: v[len(sentPrefix):]}, nil
	}
	if reason, ok := strings.CutPrefix(v, refusedPrefix); ok {
		return Record{State: Refused, RejectReason: reason}, nil
	}
	return Record{}, &UnknownRecordError{Record: v}
}

// UnknownRecordError is an id's record in a form this package does not
// know: a reply of the right shape whose record says something else. It
// wraps ErrBadReply; a reply of the wrong shape is an ErrBadReply alone.
type UnknownRecordError struct {
	Record string // as Redis keeps it
}

func (e *UnknownRecordError) Error() string {
	return fmt.Sprintf("%v: record %q", ErrBadReply, e.Record)
}

func (e *UnknownRecordError) Unwrap() error { return ErrBadReply }

// IsSent reports whether record is a send's final record (RecordSent,
// SentRecord's).
func IsSent(record string) bool {
	return record == RecordSent || strings.HasPrefix(record, sentPrefix)
}

// IsRefused reports whether record is a refusal's whose dead letter is not
// out yet (RefusedRecord's).
func IsRefused(record string) bool { return strings.HasPrefix(record, refusedPrefix) }
