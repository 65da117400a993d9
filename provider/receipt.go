package provider

import (
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// DeliveryStatus is a provider's delivery status in the dispatcher's
// vocabulary: six intermediate statuses and five final ones.
type DeliveryStatus string

// The intermediate statuses: the message may still change state.
const (
	StatusQueued   DeliveryStatus = "queued"
	StatusAccepted DeliveryStatus = "accepted"
	StatusSending  DeliveryStatus = "sending"
	StatusSent     DeliveryStatus = "sent"
	StatusBuffered DeliveryStatus = "buffered"
	StatusUnknown  DeliveryStatus = "unknown"
)

// The final statuses: the provider will say nothing more of the message
// but, rarely, a later delivered.
const (
	StatusDelivered   DeliveryStatus = "delivered"
	StatusUndelivered DeliveryStatus = "undelivered"
	StatusFailed      DeliveryStatus = "failed"
	StatusExpired     DeliveryStatus = "expired"
	StatusRejected    DeliveryStatus = "rejected"
)

// deliveryStatuses is every DeliveryStatus, with whether it is final.
var deliveryStatuses = map[DeliveryStatus]bool{
	StatusQueued: false, StatusAccepted: false, StatusSending: false,
	StatusSent: false, StatusBuffered: false, StatusUnknown: false,
	StatusDelivered: true, StatusUndelivered: true, StatusFailed: true,
	StatusExpired: true, StatusRejected: true,
}

// Final reports whether s is one of the five final statuses.
func (s DeliveryStatus) Final() bool { return deliveryStatuses[s] }

// Delivered reports whether s is StatusDelivered.
func (s DeliveryStatus) Delivered() bool { return s == StatusDelivered }

// ParseDeliveryStatus reads one of the 11 statuses by its name (what
// admission stores); false for anything else, the empty string included.
func ParseDeliveryStatus(s string) (DeliveryStatus, bool) {
	d := DeliveryStatus(s)
	_, ok := deliveryStatuses[d]
	return d, ok
}

// DeliveryReport is one verified delivery receipt.
type DeliveryReport struct {
	// ProviderID is the provider's id of the message (Vonage: of the
	// part): 1 to 128 printable ASCII characters.
	ProviderID string
	// Ref is our message id when the provider echoes it (Vonage's
	// client-ref, the generic API's client_ref); "" when it does not.
	Ref    string
	Status DeliveryStatus
	// ErrorCode is the provider's code ("30007", Vonage's err-code when
	// it is not "0"); "" when there is none.
	ErrorCode string
	// RouteFailed says the message failed for its route, not for its
	// recipient: a final failure whose ErrorCode the provider documents
	// as the carrier's or the network's (route.go). Only these count
	// toward skipping an account's route to a country.
	RouteFailed bool
	// At is when the provider says the status happened; zero when it does
	// not say (Twilio).
	At time.Time
	// OptedOut is the number the provider says asked not to receive the
	// sender's messages (Vonage: failed or rejected with err-code 9,
	// "Messaging Opted-out Numbers"), E.164; "" for any other receipt.
	OptedOut string
}

// ReceiptRequest is one receipt as it arrived.
type ReceiptRequest struct {
	// URL is the exact URL the provider was told (RECEIPTS_PUBLIC_URL +
	// "/v1/receipts/<account>"), never one built from the Host header:
	// Twilio signs it.
	URL    string
	Header http.Header
	// Body is the request's body, at most 64 KiB, already read by the
	// caller.
	Body []byte
}

var (
	// ErrForged reports a receipt that does not verify: a missing or wrong
	// signature, or an adapter with no secret to check it with. Answer 403.
	ErrForged = errors.New("provider: receipt does not verify")
	// ErrMalformed reports a verified receipt that cannot be read: a body
	// that is no form or JSON object, a parameter given twice, no id or
	// no status. A receipt that does not verify is ErrForged whatever its
	// body holds. Answer 400.
	ErrMalformed = errors.New("provider: malformed receipt")
)

// ReceiptReader verifies and parses one receipt. Verification comes first:
// no field of a receipt that does not verify is read. An error wraps
// ErrForged or ErrMalformed and never holds a value of the request.
// Client, Twilio and Vonage implement it, each safe for concurrent use.
type ReceiptReader interface {
	ReadReceipt(r ReceiptRequest) (DeliveryReport, error)
}

// WithStatusCallback makes the adapter ask for delivery receipts at url on
// each Send, exactly as given: Twilio's form field StatusCallback,
// Vonage's form field callback, the generic API's JSON field
// status_callback. Without it (or with ""), nothing is added to a send.
func WithStatusCallback(url string) Option {
	return func(c *conn) { c.statusCallback = url }
}

// WithReceiptSecret gives the generic Client the secret its provider signs
// receipts with (X-Signature: sha256=<hex HMAC-SHA256 of the raw body>),
// read at each ReadReceipt so that a reloaded file takes effect. Without
// it, every receipt is ErrForged. Twilio and Vonage ignore it: they take
// theirs in their configuration.
func WithReceiptSecret(s *Secret) Option {
	return func(c *conn) { c.receiptSecret = s }
}

// Bounds of a valid DeliveryReport's fields.
const (
	maxProviderID = 128
	maxRef        = 128
	maxErrorCode  = 32
)

// checkReport reports whether d is internally valid: a ProviderID and an
// ErrorCode of printable ASCII within their bounds, a Ref within its bound
// and free of control characters, and one of the 11 statuses. Each
// parser ends with it, so no verified receipt reaches a caller in a shape
// the fold cannot store.
func checkReport(d DeliveryReport) error {
	switch {
	case d.ProviderID == "":
		return fmt.Errorf("%w: no message id", ErrMalformed)
	case len(d.ProviderID) > maxProviderID || !printableASCII(d.ProviderID):
		return fmt.Errorf("%w: message id is not 1 to %d printable ASCII characters", ErrMalformed, maxProviderID)
	case len(d.Ref) > maxRef || d.Ref != "" && checkID(d.Ref) != nil:
		return fmt.Errorf("%w: reference longer than %d bytes or with a control character", ErrMalformed, maxRef)
	case len(d.ErrorCode) > maxErrorCode || !printableASCII(d.ErrorCode):
		return fmt.Errorf("%w: error code is not up to %d printable ASCII characters", ErrMalformed, maxErrorCode)
	}
	if _, ok := ParseDeliveryStatus(string(d.Status)); !ok {
		return fmt.Errorf("%w: no status", ErrMalformed)
	}
	return nil
}

// printableASCII reports whether every byte of s is a visible ASCII
// character (no space); the empty string is.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// hexMACEqual reports, in constant time, whether the hex string got (in
// either case) spells the MAC want. A value that is not hex matches
// nothing.
func hexMACEqual(want []byte, got string) bool {
	b, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	return hmac.Equal(want, b)
}
