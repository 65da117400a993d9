package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// An Inbound is a message a recipient sends to one of the account's
// numbers (an MO), as the Simulator's provider posts it.
type Inbound struct {
	ID, From, To, Body string
	// OptOutType is Twilio's field under Advanced Opt-Out (STOP, START,
	// HELP); the other dialects have none.
	OptOutType string
}

// PostInbound posts m to url as the Simulator's provider posts an incoming
// message, signed with secret (Twilio: the auth token; Vonage: the
// signature secret, by method; the generic API: the receipt secret), and
// returns the answer's status and body.
func (s *Simulator) PostInbound(ctx context.Context, target string, m Inbound, secret, method string) (int, string, error) {
	var body []byte
	h := make(http.Header)
	switch d := s.dialect.(type) {
	case *twilioDialect:
		f := url.Values{}
		f.Set("AccountSid", d.accountSID)
		f.Set("MessageSid", m.ID)
		f.Set("SmsSid", m.ID)
		f.Set("From", m.From)
		f.Set("To", m.To)
		f.Set("Body", m.Body)
		f.Set("NumMedia", "0")
		if m.OptOutType != "" {
			f.Set("OptOutType", m.OptOutType)
		}
		body = []byte(f.Encode())
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		h.Set("X-Twilio-Signature", twilioSignature(secret, target, f))
	case vonageDialect:
		p := map[string]string{
			"msisdn": strings.TrimPrefix(m.From, "+"), "to": strings.TrimPrefix(m.To, "+"), "messageId": m.ID,
			"text": m.Body, "type": "text", "keyword": strings.ToUpper(strings.Fields(m.Body + " x")[0]),
			"message-timestamp": time.Now().UTC().Format(time.DateTime), "api-key": d.apiKey,
			"timestamp": strconv.FormatInt(time.Now().Unix(), 10), "nonce": nonce(),
		}
		p["sig"] = vonageSignature(method, secret, p)
		f := url.Values{}
		for k, v := range p {
			f.Set(k, v)
		}
		body = []byte(f.Encode())
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	default:
		body, _ = json.Marshal(map[string]string{"id": m.ID, "from": m.From, "to": m.To, "body": m.Body})
		h.Set("Content-Type", "application/json")
		h.Set("X-Signature", genericSignature(secret, body))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.String(), nil
}
