package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"smsdispatcher/deadletter"
	"smsdispatcher/deferral"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/operator"
	"smsdispatcher/ledger"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// Page 2, a message's story on one timeline, and a support user's
// reveal of one message's number.

// event is one line of a message's timeline.
type event struct {
	At   string // RFC 3339, "" when the record keeps no time
	What string

	sortAt time.Time // At, or the time of the event before it on its account
}

// stampLayout is how the timeline writes a time: status's (RFC 3339,
// milliseconds, UTC).
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// timeline is s's events in order, each with its time where the ledger
// keeps one: the admission and the send at the send's start (the slot
// its admission booked), the receipt at its time.
func timeline(s status.MessageStory) []event {
	record := s.Record
	if record == "" {
		record = "no send-once record"
	}
	as := ""
	if s.Resend {
		as = " (as a resend)"
	}
	ev := []event{{At: s.SentAt, What: fmt.Sprintf("admitted on %s: %s, %d attempt(s)%s", s.Account, record, s.Attempts, as)}}
	if s.SentAt != "" || len(s.ProviderIDs) > 0 {
		ev = append(ev, event{At: s.SentAt, What: "sent on " + s.Account + ", provider id(s) " + strings.Join(s.ProviderIDs, ", ")})
	}
	if s.Status != "" {
		what := "receipt on " + s.Account + ": " + s.Status
		if s.ErrorCode != "" {
			what += ", error " + s.ErrorCode
		}
		ev = append(ev, event{At: s.StatusAt, What: what})
	} else {
		ev = append(ev, event{What: "no receipt yet on " + s.Account})
	}
	for _, id := range slices.Sorted(maps.Keys(s.Parts)) {
		if len(s.Parts) > 1 {
			ev = append(ev, event{What: "part " + id + ": " + s.Parts[id]})
		}
	}
	if s.Resent {
		ev = append(ev, event{What: "resent once through the next account"})
	}
	if s.Owed {
		ev = append(ev, event{What: "status event owed: not yet published"})
	}
	// An event without a time keeps its place after the one before it.
	var last time.Time
	for i := range ev {
		if t, err := time.Parse(time.RFC3339, ev[i].At); err == nil {
			last = t
		}
		ev[i].sortAt = last
	}
	return ev
}

// noteAt is a note of the message's story kept outside the ledger (its
// suppression, deferral, block) at the time it happened.
func noteAt(at time.Time, what string) event {
	e := event{What: what, sortAt: at}
	if !at.IsZero() {
		e.At = at.UTC().Format(stampLayout)
	}
	return e
}

// merged is every account's events and the notes, in time order: an
// event without a time stays after the one before it on its account.
func merged(stories []status.MessageStory, notes []event) []event {
	var all []event
	for _, s := range stories {
		all = append(all, timeline(s)...)
	}
	all = append(all, notes...)
	slices.SortStableFunc(all, func(a, b event) int { return a.sortAt.Compare(b.sortAt) })
	return all
}

// message is page 2: a message's story by its id or, when no message
// has that id, by a provider id, on one timeline with where it is
// deferred, the suppression list's refusal and the guard's block, as
// `dispatcher message` prints them, in time order.
func (h *Handler) message(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	data := map[string]any{"ID": id}
	if id != "" {
		m, notes, err := h.story(r.Context(), id)
		if err == nil && !m.Found() && len(notes) == 0 {
			var msgID string
			if msgID, err = h.messageOf(r.Context(), id); err == nil && msgID != "" {
				data["ByProviderID"], data["MessageID"] = true, msgID
				m, notes, err = h.story(r.Context(), msgID)
			}
		}
		if err != nil {
			h.fail(w, r, "reading the message's story in Redis", err)
			return
		}
		var accounts []string
		for _, s := range m.Accounts {
			accounts = append(accounts, s.Account)
		}
		data["Searched"], data["Accounts"], data["Found"] = true, accounts, m.Found() || len(notes) > 0
		data["Events"] = merged(m.Accounts, notes)
	}
	h.render(w, r, "message", data)
}

// story is id's story on every account, and the notes saying that the
// suppression list stopped it, where it is deferred, or that the guard
// blocked it, each at its time.
func (h *Handler) story(ctx context.Context, id string) (status.Message, []event, error) {
	m, err := status.ReadMessage(ctx, h.setups, id)
	if err != nil {
		return m, nil, err
	}
	deferred, err := h.deferredNotes(ctx, id)
	if err != nil {
		return m, nil, err
	}
	notes := deferred
	at, e, stopped, err := suppress.NewStore(h.o.Redis, "", nil).Refusal(ctx, id)
	if err != nil {
		return m, nil, err
	}
	if stopped {
		notes = append(notes, noteAt(at, operator.SuppressedNote(at, e)))
	}
	guarded := operator.GuardedClasses(h.o.Settings.ClassList())
	n, blocked, err := guard.Noted(ctx, h.o.Redis, guarded, id)
	if err != nil || !blocked {
		return m, notes, err
	}
	return m, append(notes, noteAt(n.At, operator.BlockedLine(id, n))), nil
}

// deferredNotes are `dispatcher message`'s deferral lines of id
// (operator.Deferrals), each at the time it was deferred.
func (h *Handler) deferredNotes(ctx context.Context, id string) ([]event, error) {
	ds, err := operator.Deferrals(ctx, h.o.Redis, h.o.Settings, id)
	out := make([]event, len(ds))
	for i, d := range ds {
		out[i] = noteAt(d.DeferredAt, d.Note())
	}
	return out, err
}

// messageOf is the id of the message whose story a provider id names on
// one of the accounts, "" when none.
func (h *Handler) messageOf(ctx context.Context, pid string) (string, error) {
	for _, s := range h.setups {
		id, ok, err := ledger.MessageOf(ctx, h.o.Redis, keys.For(s.Name), pid)
		if err != nil || ok {
			return id, err
		}
	}
	return "", nil
}

// number shows one dead letter's whole number to a support user.
func (h *Handler) number(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("message_id")
	if !h.allowed(w, r, Support, "reveal_number", id) {
		return
	}
	if id == "" {
		http.Error(w, "no message_id", http.StatusBadRequest)
		return
	}
	ls, err := deadletter.List(r.Context(), h.o.PubSub, operator.Inspect(h.o.Settings, h.o.DeadLetterWait, deadLetterLimit), deadletter.Filter{IDs: []string{id}})
	if err != nil {
		h.fail(w, r, "reading the dead letters", err)
		return
	}
	data, outcome := map[string]any{"Of": "Dead letter " + id, "Back": "/deadletters"}, "not_found"
	for _, l := range ls.Letters {
		if m, _ := dispatch.Decode(l.Data, l.MessageID); l.MessageID == id && m.To != "" {
			data["Of"], data["To"], outcome = "Dead letter "+id+" (message "+l.ID+")", m.To, "ok"
		}
	}
	h.audit(r.Context(), userOf(r), "reveal_number", id, outcome)
	h.render(w, r, "number", data)
}

// messageNumber shows one message's whole number to a support user, from
// the Message page: read where the console finds a message's number
// (numberOf), audited with where it was found.
func (h *Handler) messageNumber(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.FormValue("message_id"))
	if !h.allowed(w, r, Support, "reveal_number", id) {
		return
	}
	if id == "" {
		http.Error(w, "no message_id", http.StatusBadRequest)
		return
	}
	number, where, err := h.numberOf(r.Context(), id)
	if err != nil {
		h.auditDetail(r.Context(), userOf(r), "reveal_number", id, "error", err.Error())
		h.fail(w, r, "reading the message's number", err)
		return
	}
	outcome := "ok"
	if number == "" {
		outcome = "not_found"
	}
	h.auditDetail(r.Context(), userOf(r), "reveal_number", id, outcome, where)
	h.render(w, r, "number", map[string]any{"Of": "Message " + id + " (from " + where + ")", "To": number,
		"Back": "/message?" + url.Values{"id": {id}}.Encode(), "Message": true})
}

// numberOf is message id's whole number and where it was read: the
// suppression list's record of its refusal, its deferral, or its dead
// letter; "" when none of them has it. The ledger keeps no number of a
// message sent (only a hash of an OTP's, for its route's health).
func (h *Handler) numberOf(ctx context.Context, id string) (number, where string, err error) {
	_, e, stopped, err := suppress.NewStore(h.o.Redis, "", nil).Refusal(ctx, id)
	if err != nil || (stopped && e.Number != "") {
		return e.Number, "its refusal by the suppression list", err
	}
	classes, err := operator.DeferringClasses(h.o.Settings, "")
	if err != nil {
		return "", "", err
	}
	store := deferral.New(h.o.Redis, nil, nil)
	for _, class := range classes {
		d, found, err := store.Get(ctx, class, id)
		if err != nil {
			return "", "", err
		}
		if m, _ := dispatch.Decode(d.Data, id); found && m.To != "" {
			return m.To, "its deferral in class " + class, nil
		}
	}
	ls, err := deadletter.List(ctx, h.o.PubSub, operator.Inspect(h.o.Settings, h.o.DeadLetterWait, deadLetterLimit), deadletter.Filter{IDs: []string{id}})
	if err != nil {
		return "", "", err
	}
	for _, l := range ls.Letters {
		if m, _ := dispatch.Decode(l.Data, l.MessageID); m.To != "" {
			return m.To, "its dead letter " + l.MessageID, nil
		}
	}
	return "", "none of its suppression record, deferral or dead letter", nil
}
