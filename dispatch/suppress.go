package dispatch

import (
	"context"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
)

// The suppression list's part of the pipeline (docs/suppressions.md): a
// message to a number on it is stopped before admission, whatever path
// brought it (a first send, a resend, a replay: each comes through
// handle), and again just before the send (a change that came while it
// waited for its slot, on its home or the account it overflowed to); a
// provider's word that the recipient opted out puts the number on the
// list for every account. Stopped, it takes no slot (or gives its slot
// back unused), is acked, and its status event says suppressed.

// listed reports whether a message of class to number is stopped by the
// list, and the source of the entry that stops it.
func (d *Dispatcher) listed(class admission.Class, number string) (source string, ok bool) {
	if d.deps.Suppressions == nil || !d.policy(class).Suppressed {
		return "", false
	}
	return d.deps.Suppressions.Suppressed(number)
}

// refused reports whether m may not go at all, and if so makes t say why:
// its number is on the suppression list (the recipient's consent comes
// first), or the pumping guard blocks it (home, the first account of its
// route, is the account its status event names). Asked before admission on every path, and again just
// before the send, since either may change while a message waits for its
// slot. Both read the process's memory: no Redis call.
func (d *Dispatcher) refused(ctx context.Context, class admission.Class, m Message, home *account, t *try) bool {
	if source, ok := d.listed(class, m.To); ok {
		t.outcome, t.err, t.suppressed = nack.Suppressed, nil, source
		return true
	}
	if b := d.guardBlocks(ctx, class, m, home); b.blocked != "" {
		t.outcome, t.err, t.blocked = b.outcome, b.err, b.blocked
		return true
	}
	return false
}

// optedOut puts m's number on the list on the word of a's provider.
func (d *Dispatcher) optedOut(ctx context.Context, a *account, m Message) {
	if d.deps.Suppressions == nil {
		return
	}
	if err := d.deps.Suppressions.OptedOut(context.WithoutCancel(ctx), m.To, a.Name); err != nil {
		d.cfg.Logger.Error("could not put a number the provider says opted out on the suppression list", "account", a.Name, "id", m.ID, "err", err)
	}
}

// suppressedEnd publishes the status event of a delivery to number the
// list stopped, once it was acked.
func (d *Dispatcher) suppressedEnd(ctx context.Context, ev Event, number string) {
	if ev.Outcome != nack.Suppressed || d.deps.Suppressions == nil {
		return
	}
	d.deps.Suppressions.Refused(context.WithoutCancel(ctx), ev.ID, number, ev.Class, ev.Account, ev.SuppressedBy)
}
