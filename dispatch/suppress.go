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

// stoppedByList reports whether the list stops a message of class to
// number, and if so makes t say so: the check before admission.
func (d *Dispatcher) stoppedByList(class admission.Class, number string, t *try) bool {
	source, ok := d.listed(class, number)
	if ok {
		*t = try{outcome: nack.Suppressed, suppressed: source}
	}
	return ok
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
