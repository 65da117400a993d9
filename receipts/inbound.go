package receipts

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"smsdispatcher/provider"
)

// InboundHandler takes a verified inbound message of an account: it reads
// its keyword, changes the suppression list, and publishes it once per
// provider id (server's suppressions). An error makes the webhook answer
// 503: the provider posts it again.
type InboundHandler interface {
	Inbound(ctx context.Context, account string, in provider.Inbound) error
	// OptedOut puts number on the list, on the word of account's
	// provider in a receipt (Vonage's err-code 9).
	OptedOut(ctx context.Context, number, account string) error
	// SettledSuppressed records that the message id of class, which a
	// receipt saying number opted out settled suppressed, was stopped by
	// the number's entry (dispatcher message says it), and counts it as
	// a message the list stopped. A failure is logged, not returned: the
	// receipt is folded already.
	SettledSuppressed(ctx context.Context, id, class, number string)
	// Unread counts an inbound post to account refused before it was
	// read: outcome is OutcomeForged, OutcomeMalformed or
	// OutcomeTooLarge. Nothing of the post is handed over.
	Unread(account, outcome string)
}

// twiML is Twilio's answer to an incoming message that sends nothing
// back: the dispatcher never replies itself.
const twiML = `<?xml version="1.0" encoding="UTF-8"?><Response/>`

// inbound handles one inbound message (an MO) of POST /v1/inbound/<account>,
// verified exactly as the account's receipts are: 413 over MaxBodyBytes,
// 403 for one that does not verify and 400 for a verified one that does
// not parse, both changing nothing and logging nothing of it; 503 when its
// handling failed; otherwise 200 (Twilio's: an empty TwiML response).
func (s *Server) inbound(w http.ResponseWriter, r *http.Request) {
	a, ok := s.accounts[r.PathValue("account")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	reader, ok := a.Reader.(provider.InboundReader)
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			s.cfg.Inbound.Unread(a.Name, OutcomeTooLarge)
			http.Error(w, "message too large", http.StatusRequestEntityTooLarge)
			return
		}
		s.cfg.Inbound.Unread(a.Name, OutcomeMalformed)
		http.Error(w, "message unreadable", http.StatusBadRequest)
		return
	}
	in, err := reader.ReadInbound(provider.ReceiptRequest{URL: InboundURL(s.cfg.PublicURL, a.Name), Header: r.Header, Body: body})
	switch {
	case errors.Is(err, provider.ErrForged):
		s.cfg.Inbound.Unread(a.Name, OutcomeForged)
		if held, ok := a.forged.allow(time.Now()); ok {
			s.logger.Warn("receipts: an inbound message did not verify: refused", "account", a.Name, "refused_unlogged", held)
		}
		http.Error(w, "message does not verify", http.StatusForbidden)
		return
	case err != nil:
		s.cfg.Inbound.Unread(a.Name, OutcomeMalformed)
		http.Error(w, "malformed message", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.publishBound)
	err = s.cfg.Inbound.Inbound(ctx, a.Name, in)
	cancel()
	if err != nil {
		if held, ok := a.ledgerErr.allow(time.Now()); ok {
			s.logger.Warn("receipts: an inbound message could not be handled: answered 503, the provider posts it again", "account", a.Name, "err", err, "unlogged", held)
		}
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if _, twilio := a.Reader.(*provider.Twilio); twilio {
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, twiML)
		return
	}
	w.WriteHeader(http.StatusOK)
}
