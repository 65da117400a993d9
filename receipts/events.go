package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"smsdispatcher/internal/attr"
	"smsdispatcher/ledger"

	"cloud.google.com/go/pubsub/v2"
	"github.com/cenkalti/backoff/v4"
)

// Attributes of a status event.
const (
	AttrID     = "id"
	AttrClass  = "class"
	AttrStatus = "status"
)

// TimeLayout is a status event's time: RFC 3339 with milliseconds, UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// StatusEvent is the data of a message on the status topic: a message's
// final state. Its times are TimeLayout, "" when not known.
type StatusEvent struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	ErrorCode  string `json:"error_code"`
	ProviderID string `json:"provider_id"`
	Account    string `json:"account"`
	Class      string `json:"class"`
	SentAt     string `json:"sent_at"`
	StatusAt   string `json:"status_at"`
	// Until is, for a deferred message (status deferred), when it is due
	// for release; absent otherwise.
	Until string `json:"until,omitempty"`
	// Source is, for a suppressed message (status suppressed), the
	// source of the list's entry that stopped it ("provider" when its
	// provider refused it for the recipient's opt-out); absent otherwise.
	Source string `json:"source,omitempty"`
}

// SourceProvider is the Source of a message its provider refused for
// the recipient's opt-out (suppress.SourceProvider).
const SourceProvider = "provider"

// statusEvent returns f's status event on account: its data and
// attributes.
func statusEvent(account string, f ledger.Fold) ([]byte, map[string]string) {
	ev := StatusEvent{
		ID: f.ID, Status: f.Status, ErrorCode: f.ErrorCode, ProviderID: f.ProviderID,
		Account: account, Class: f.Class, SentAt: eventTime(f.SentAt), StatusAt: eventTime(f.StatusAt),
	}
	if f.Status == ledger.StatusSuppressed {
		ev.Source = SourceProvider // the fold's suppressed is only ever the provider's word
	}
	data, _ := json.Marshal(ev) // strings only: it cannot fail
	return data, map[string]string{AttrID: f.ID, AttrClass: f.Class, AttrStatus: f.Status}
}

func eventTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

// resendAttrs are the attributes of f's resend, which account failed to
// deliver.
func resendAttrs(account string, f ledger.Fold) map[string]string {
	reason := f.Status
	if f.ErrorCode != "" {
		reason += " " + f.ErrorCode
	}
	return map[string]string{attr.ResendAvoid: account, attr.ResendReason: reason}
}

// publishOwed publishes what f owes: its resend first (what the message's
// user waits for), then its status event; once the event is out, the
// ledger is told, and the next flush clears it in Redis. On an error the
// event stays owed and a sweep publishes it again; the resend, handed out
// once, goes again only if it was given back (handOut).
func (s *Server) publishOwed(ctx context.Context, a *account, f *ledger.Fold) error {
	if f.Resend != nil {
		if err := s.handOut(ctx, a, *f); err != nil {
			return err
		}
		f.Resend = nil // out once: never again from this fold
	}
	data, attrs := statusEvent(a.Name, *f)
	if err := publish(ctx, s.cfg.Status, data, attrs); err != nil {
		return fmt.Errorf("publish status event: %w", err)
	}
	a.Ledger.EventPublished(f.ID)
	a.pending.Store(true)
	return nil
}

// handOut publishes f's resend, which the ledger handed out once, unless
// its window has passed (resendDue): then it is dropped and counted. A
// publish that fails gives the payload back to the ledger, for the next
// sweep to hand out with the event: one payload is never out twice,
// whatever becomes of the status event.
func (s *Server) handOut(ctx context.Context, a *account, f ledger.Fold) error {
	if now := s.now(); !s.resendDue(f, now) {
		s.metrics.ResendLate(a.Name)
		if held, ok := a.late.allow(now); ok {
			s.logger.Warn("receipts: a resend past its window was dropped unsent", "account", a.Name, "id", f.ID, "unlogged", held)
		}
		return nil
	}
	err := publish(ctx, s.cfg.Resend, f.Resend, resendAttrs(a.Name, f))
	if err == nil {
		s.metrics.Resend(a.Name, f.Status)
		return nil
	}
	// The retries may have spent ctx: the ledger bounds its own call.
	if _, gerr := a.Ledger.GiveBackResend(context.WithoutCancel(ctx), f); gerr != nil {
		return fmt.Errorf("publish resend: %w; giving it back: %v: the resend is lost", err, gerr)
	}
	return fmt.Errorf("publish resend: %w", err)
}

// resendDue reports whether f's resend may still go out at now: before
// the deadline its data holds (the dispatcher writes one into every
// payload it keeps: dispatch.WithID; Config.Deadline reads it), or, for
// data without one (kept by an older version), within attr.ResendWithin
// of its send (Fold.SentAt: the provider's acceptance follows within the
// send's own time), as docs/contract.md promises.
func (s *Server) resendDue(f ledger.Fold, now time.Time) bool {
	until := f.SentAt.Add(attr.ResendWithin)
	if d := s.cfg.Deadline(f.Resend); !d.IsZero() {
		until = d
	}
	return now.Before(until)
}

// publish publishes to p, retrying with backoff until ctx ends, and
// returns the last error.
func publish(ctx context.Context, p Publisher, data []byte, attrs map[string]string) error {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0), // ctx bounds it
	)
	var last error
	err := backoff.Retry(func() error {
		last = p.Publish(ctx, data, attrs)
		return last
	}, backoff.WithContext(b, ctx))
	if err != nil && last != nil {
		return last
	}
	return err
}

// TopicPublisher publishes to a Pub/Sub topic.
type TopicPublisher struct {
	Publisher *pubsub.Publisher
}

// Publish publishes one message and waits for the server's answer.
func (t TopicPublisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	_, err := t.Publisher.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(ctx)
	return err
}
