package receipts

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"smsdispatcher/ledger"
	"smsdispatcher/provider"
)

// Outcomes of a receipt, the outcome label of Metrics.Receipt.
const (
	OutcomeOK        = "ok"
	OutcomeDuplicate = "duplicate"
	OutcomeUnknown   = "unknown"
	OutcomeForged    = "forged"
	OutcomeMalformed = "malformed"
	OutcomeTooLarge  = "too_large"
	OutcomeError     = "error"
)

// Handler returns the receipts' endpoint, POST /v1/receipts/<account>:
// 404 for an account not configured, 405 for another method.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/receipts/{account}", s.receive)
	if s.cfg.Inbound != nil {
		mux.HandleFunc("POST /v1/inbound/{account}", s.inbound)
	}
	return mux
}

// receive handles one receipt. Its answers: 413 for a body over
// MaxBodyBytes; 403 for one that does not verify, whatever its body, and
// 400 for a verified one that does not parse, both changing nothing; 503 when Redis did not answer (the
// provider posts it again); otherwise 200, the receipt folded in (or its
// message unknown: a provider retries anything else for hours).
func (s *Server) receive(w http.ResponseWriter, r *http.Request) {
	a, ok := s.accounts[r.PathValue("account")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			s.metrics.Receipt(a.Name, "", "", OutcomeTooLarge)
			http.Error(w, "receipt too large", http.StatusRequestEntityTooLarge)
			return
		}
		s.metrics.Receipt(a.Name, "", "", OutcomeMalformed)
		http.Error(w, "receipt unreadable", http.StatusBadRequest)
		return
	}
	// The URL the provider was told, never the request's Host: a
	// signature over an address a client chose proves nothing.
	dr, err := a.Reader.ReadReceipt(provider.ReceiptRequest{URL: a.url, Header: r.Header, Body: body})
	switch {
	case errors.Is(err, provider.ErrForged):
		s.metrics.Receipt(a.Name, "", "", OutcomeForged)
		if held, ok := a.forged.allow(time.Now()); ok {
			// The error and the request stay out: they may carry a
			// number or a signature.
			s.logger.Warn("receipts: a receipt did not verify: refused", "account", a.Name, "refused_unlogged", held)
		}
		http.Error(w, "receipt does not verify", http.StatusForbidden)
		return
	case err != nil:
		s.metrics.Receipt(a.Name, "", "", OutcomeMalformed)
		http.Error(w, "malformed receipt", http.StatusBadRequest)
		return
	}

	if dr.OptedOut != "" && s.cfg.Inbound != nil {
		// Before the fold, whose answer the provider waits for: a 503
		// here and the provider posts it again, the fold not yet run.
		if err := s.cfg.Inbound.OptedOut(r.Context(), dr.OptedOut, a.Name); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
	}
	rep := reportOf(dr)
	if dr.OptedOut != "" {
		// Settled as a 21610 is: suppressed, never resent (the fold
		// drops its resend), its event source provider.
		rep.Status, rep.Final, rep.Delivered = ledger.StatusSuppressed, true, false
	}
	rep.Again = rep.ProviderID != "" && a.retried(rep.ProviderID)
	f, err := s.fold(r.Context(), a, rep)
	if err != nil {
		if rep.ProviderID != "" {
			a.failed(rep.ProviderID, time.Now())
		}
		s.metrics.Receipt(a.Name, "", string(dr.Status), OutcomeError)
		if held, ok := a.ledgerErr.allow(time.Now()); ok {
			s.logger.Warn("receipts: a receipt could not be folded: answered 503, the provider posts it again", "account", a.Name, "err", err, "unlogged", held)
		}
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if !f.Known {
		s.metrics.Receipt(a.Name, "", string(dr.Status), OutcomeUnknown)
		w.WriteHeader(http.StatusOK)
		return
	}
	outcome := OutcomeOK
	if !f.Changed {
		outcome = OutcomeDuplicate
	}
	s.metrics.Receipt(a.Name, f.Class, f.Status, outcome)
	if f.Changed && f.Status == ledger.StatusSuppressed && dr.OptedOut != "" && s.cfg.Inbound != nil {
		s.cfg.Inbound.SettledSuppressed(r.Context(), f.ID, f.Class, dr.OptedOut)
	}
	if f.Changed && f.Final && !f.SentAt.IsZero() {
		s.metrics.Delivery(a.Name, f.Class, max(0, f.StatusAt.Sub(f.SentAt)))
	}
	if f.Owed {
		// Its own bound, whether or not the provider waits: the state is
		// in Redis, and a publish that fails is held and tried again
		// (retryEvery, and before the process stops).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.publishBound)
		err := s.publishOwed(ctx, a, &f)
		cancel()
		if err != nil {
			// A resend that is not out went back to the ledger, and the
			// sweep hands out both; a fold whose resend is out holds its
			// event alone.
			if f.Resend == nil {
				a.hold(f)
			}
			if held, ok := a.publishErr.allow(time.Now()); ok {
				s.logger.Warn("receipts: a status event was not published: it stays owed, tried again in a second", "account", a.Name, "err", err, "unlogged", held)
			}
		} else {
			a.release(f.ID, nil)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// earlyWaits are the waits before a receipt of a provider id the account
// does not know is folded again: a provider may post a receipt before the
// send's own call after the send (finish.lua, which maps the id) has
// returned, and a receipt answered 2xx is never posted again. A receipt
// truly unknown (an expired record, another system's) costs these calls
// and 1.5 s more.
var earlyWaits = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, time.Second}

// fold folds rep on a's ledger, again after each of earlyWaits while its
// provider id is unknown there.
func (s *Server) fold(ctx context.Context, a *account, rep ledger.Report) (ledger.Fold, error) {
	f, err := a.Ledger.Receipt(ctx, rep)
	for _, wait := range earlyWaits {
		if err != nil || f.Known {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return f, nil
		case <-t.C:
		}
		f, err = a.Ledger.Receipt(ctx, rep)
	}
	return f, err
}

// reportOf is dr in the fold's terms.
func reportOf(dr provider.DeliveryReport) ledger.Report {
	return ledger.Report{
		ProviderID:  dr.ProviderID,
		Status:      string(dr.Status),
		Final:       dr.Status.Final(),
		Delivered:   dr.Status.Delivered(),
		ErrorCode:   dr.ErrorCode,
		RouteFailed: dr.RouteFailed,
		At:          dr.At,
	}
}
