package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// clientReceipt is the generic API's delivery receipt (docs/contract.md
// section 3).
type clientReceipt struct {
	ID        string `json:"id"`         // the provider's id, as its send's answer gave it
	ClientRef string `json:"client_ref"` // the message's ID
	Status    string `json:"status"`     // one of the 11 DeliveryStatus names
	ErrorCode string `json:"error_code"`
	Timestamp string `json:"timestamp"` // RFC 3339; "" when not given
}

// ReadReceipt verifies and reads one of the generic API's delivery
// receipts: a JSON object whose raw body is signed in the header
// X-Signature: sha256=<hex HMAC-SHA256 keyed by the receipt secret>. The
// secret (WithReceiptSecret) is read at each call; without one, every
// receipt is ErrForged. The hex is compared in constant time, in either
// case.
//
// The report is id, client_ref (Ref), status (one of the 11 names; any
// other is ErrMalformed), error_code and timestamp (At; RFC 3339, zero
// when absent). Fields it does not know are ignored.
func (c *Client) ReadReceipt(r ReceiptRequest) (DeliveryReport, error) {
	if err := c.verify(r); err != nil {
		return DeliveryReport{}, err
	}

	var w clientReceipt
	if err := json.Unmarshal(r.Body, &w); err != nil {
		return DeliveryReport{}, fmt.Errorf("%w: not a JSON receipt object", ErrMalformed)
	}
	status, ok := ParseDeliveryStatus(w.Status)
	if !ok {
		return DeliveryReport{}, fmt.Errorf("%w: status is none of the 11 names", ErrMalformed)
	}
	d := DeliveryReport{ProviderID: w.ID, Ref: w.ClientRef, Status: status, ErrorCode: w.ErrorCode}
	d.RouteFailed = routeFailed(d, genericRouteCodes)
	if w.Timestamp != "" {
		at, err := time.Parse(time.RFC3339Nano, w.Timestamp)
		if err != nil {
			return DeliveryReport{}, fmt.Errorf("%w: timestamp is not RFC 3339", ErrMalformed)
		}
		d.At = at
	}
	if err := checkReport(d); err != nil {
		return DeliveryReport{}, err
	}
	return d, nil
}

// verify checks r's X-Signature, the generic API's signature of receipts
// and inbound messages alike.
func (c *Client) verify(r ReceiptRequest) error {
	sig, ok := strings.CutPrefix(r.Header.Get("X-Signature"), "sha256=")
	var secret string
	if c.receiptSecret != nil {
		secret = c.receiptSecret.Value()
	}
	switch {
	case !ok || sig == "":
		return fmt.Errorf("%w: no X-Signature sha256=", ErrForged)
	case secret == "":
		return fmt.Errorf("%w: no receipt secret", ErrForged)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(r.Body)
	if !hexMACEqual(mac.Sum(nil), sig) {
		return fmt.Errorf("%w: X-Signature does not match", ErrForged)
	}
	return nil
}
