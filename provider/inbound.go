package provider

import (
	"encoding/json"
	"fmt"
	"net/url"

	"smsdispatcher/provider/internal/wire"
)

// An Inbound is a message a recipient sent to one of the account's
// numbers (an MO), as its provider's webhook posts it, verified exactly as
// its delivery receipts are.
type Inbound struct {
	ID   string // the provider's message id: Twilio's MessageSid, Vonage's messageId, the generic API's id
	From string // the recipient's number, E.164
	To   string // the account's number it was sent to
	Body string
	// OptOutType is Twilio's reading of the body under Advanced Opt-Out
	// (STOP, START, HELP); "" when absent.
	OptOutType string
}

// InboundReader verifies and reads an inbound message's webhook:
// ErrForged when its signature does not verify, ErrMalformed when the
// verified body is not one.
type InboundReader interface {
	ReadInbound(r ReceiptRequest) (Inbound, error)
}

var (
	_ InboundReader = (*Twilio)(nil)
	_ InboundReader = (*Vonage)(nil)
	_ InboundReader = (*Client)(nil)
)

// checkInbound refuses an inbound message without an id or a sender.
func checkInbound(in Inbound) (Inbound, error) {
	if in.ID == "" || len(in.ID) > maxProviderID || !printableASCII(in.ID) || in.From == "" {
		return Inbound{}, fmt.Errorf("%w: inbound: no message id or no sender", ErrMalformed)
	}
	return in, nil
}

// ReadInbound reads Twilio's incoming-message webhook (form From, To,
// Body, MessageSid, and OptOutType under Advanced Opt-Out), signed as its
// status callbacks are.
func (t *Twilio) ReadInbound(r ReceiptRequest) (Inbound, error) {
	form, err := twilioVerify(t.cfg.AuthToken.Value(), r)
	if err != nil {
		return Inbound{}, err
	}
	return checkInbound(twilioInbound(form))
}

func twilioInbound(form url.Values) Inbound {
	return Inbound{ID: form.Get("MessageSid"), From: form.Get("From"), To: form.Get("To"), Body: form.Get("Body"), OptOutType: form.Get("OptOutType")}
}

// ReadInbound reads Vonage's inbound SMS (msisdn, to, text, messageId),
// signed with sig as its receipts are. Vonage writes both numbers
// without the '+': it is added to each (vonageE164), so that from and to
// read as Twilio's and the generic API's do.
func (v *Vonage) ReadInbound(r ReceiptRequest) (Inbound, error) {
	params, malformed := vonageParams(r)
	if err := v.verify(params); err != nil {
		return Inbound{}, err
	}
	if malformed != nil {
		return Inbound{}, malformed
	}
	return checkInbound(Inbound{ID: params["messageId"], From: vonageE164(params["msisdn"]), To: vonageE164(params["to"]), Body: params["text"]})
}

// vonageE164 is a number as Vonage writes it (447547232824) in E.164
// (+447547232824); anything else (a '+' already, a name) as it is.
func vonageE164(n string) string {
	if n == "" || !wire.AllDigits(n) {
		return n
	}
	return "+" + n
}

// ReadInbound reads the generic API's inbound message, {"from", "to",
// "body", "id"}, signed with X-Signature as its receipts are.
func (c *Client) ReadInbound(r ReceiptRequest) (Inbound, error) {
	if err := c.verify(r); err != nil {
		return Inbound{}, err
	}
	var w struct{ ID, From, To, Body string }
	if err := json.Unmarshal(r.Body, &w); err != nil {
		return Inbound{}, fmt.Errorf("%w: not a JSON inbound object", ErrMalformed)
	}
	return checkInbound(Inbound{ID: w.ID, From: w.From, To: w.To, Body: w.Body})
}
