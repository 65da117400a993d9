package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/deadletter"
	"smsdispatcher/deferral"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/operator"
	"smsdispatcher/ledger"
	"smsdispatcher/provider"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// report reads every account's state now. The chart is the sampler's
// (Handler.sample): a page's reading is not added to it, so that the
// readings it takes in come one after the other.
func (h *Handler) report(ctx context.Context) (status.Report, error) {
	return status.Read(ctx, status.Redis{Client: h.o.Redis, Timeout: h.o.Timeout}, h.setups, h.routing, time.Now())
}

// classNames are the configured classes' names, in priority order.
func (h *Handler) classNames() []string {
	var names []string
	for _, c := range h.o.Settings.ClassList() {
		names = append(names, c.Name.String())
	}
	return names
}

// overview is page 1: every account, the chart, the processes.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	rep, err := h.report(r.Context())
	if err != nil {
		h.fail(w, r, "reading the accounts' state in Redis", err)
		return
	}
	h.render(w, r, "overview", map[string]any{"Report": rep, "Classes": h.classNames(), "Chart": h.chartNow()})
}

// chartFragment is the chart alone, which the overview's script fetches
// every few seconds: the sampler's readings, no Redis call.
func (h *Handler) chartFragment(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.pages["overview"].ExecuteTemplate(w, "chart", h.chartNow()); err != nil {
		h.logger.Warn("console: render chart", "err", err)
	}
}

// chartNow is the chart up to now, against every account's contract.
func (h *Handler) chartNow() chartView {
	contract := 0.0
	var accounts []string
	for _, s := range h.setups {
		contract += s.ContractRPS
		accounts = append(accounts, s.Name)
	}
	v := h.chart.view(time.Now(), h.classNames(), accounts, contract)
	v.SampleSeconds = h.o.SampleEvery.Seconds()
	return v
}

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

// override sets or clears an account's override (the form's action, set
// or clear) as `dispatcher override --set-target-rps, --set-marketing-rps,
// --ttl, --clear` does: operators only, audited with what it did.
func (h *Handler) override(w http.ResponseWriter, r *http.Request) {
	name, clear := r.PathValue("account"), r.FormValue("action") == "clear"
	action := "override.set"
	if clear {
		action = "override.clear"
	}
	if !h.allowed(w, r, Operator, action, name) {
		return
	}
	i := slices.IndexFunc(h.setups, func(s status.Setup) bool { return s.Name == name })
	if i < 0 {
		http.Error(w, "no such account", http.StatusNotFound)
		return
	}
	o, err := overrideOf(r, clear)
	if err == nil {
		err = operator.CheckOverride(o, [3]string{"target_rps", "marketing_rps", "ttl"})
	}
	if err != nil {
		h.auditDetail(r.Context(), userOf(r), action, name, "error", err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	did, err := operator.ChangeOverride(r.Context(), h.setups[i].Limiter, h.setups[i].Account, o)
	if err != nil {
		h.auditDetail(r.Context(), userOf(r), action, name, "error", err.Error())
		h.fail(w, r, "changing the override in Redis", err)
		return
	}
	h.auditDetail(r.Context(), userOf(r), action, name, "ok", did)
	http.Redirect(w, r, h.o.Path+"/#account-"+url.PathEscape(name), http.StatusSeeOther)
}

// overrideOf is the override r's form asks for: target_rps and
// marketing_rps (empty: not lowered), ttl (empty: an hour, as
// `dispatcher override`'s; 0: until cleared).
func overrideOf(r *http.Request, clear bool) (operator.Override, error) {
	o := operator.Override{TTL: time.Hour, Clear: clear}
	if clear {
		return o, nil
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"target_rps", &o.TargetRPS}, {"marketing_rps", &o.MarketingRPS}} {
		if v := strings.TrimSpace(r.FormValue(f.name)); v != "" {
			rps, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return o, fmt.Errorf("%s %q: want a number of units per second", f.name, v)
			}
			*f.to = rps
		}
	}
	if v := strings.TrimSpace(r.FormValue("ttl")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return o, fmt.Errorf("ttl %q: want a duration such as 1h (0: until cleared)", v)
		}
		o.TTL = d
	}
	return o, nil
}

// filterOf is the dead-letter selection of r's reason, class and since.
func filterOf(r *http.Request) (deadletter.Filter, error) {
	f := deadletter.Filter{Reason: r.FormValue("reason"), Class: r.FormValue("class")}
	if s := r.FormValue("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return f, fmt.Errorf("since %q: want a duration such as 1h", s)
		}
		f.Since = d
	}
	return f, nil
}

// letterView is a dead letter as its row shows it: the number masked.
type letterView struct {
	MessageID, ID, Class, Reason, To, Published string
	Replays                                     int
}

// deadLetterLimit bounds the dead letters a page lists.
const deadLetterLimit = 500

// replayBound is how long a replay's answer may take: its reading and a
// republish and an ack per letter.
const replayBound = 10 * time.Minute

// deadLetters is page 3: the dead letters with filters, and the replay's
// forms (each a dry run first).
func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := filterOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ls, err := deadletter.List(r.Context(), h.o.PubSub, operator.Inspect(h.o.Settings, h.o.DeadLetterWait, deadLetterLimit), f)
	if err != nil {
		h.fail(w, r, "reading the dead letters", err)
		return
	}
	var rows []letterView
	for _, l := range ls.Letters {
		rows = append(rows, letterView{MessageID: l.MessageID, ID: l.ID, Class: l.Class, Reason: l.Reason, To: l.MaskedTo(),
			Published: l.Published.Format(time.RFC3339), Replays: l.Replays})
	}
	h.render(w, r, "deadletters", map[string]any{"Letters": rows, "Read": ls.Read, "Limited": ls.Limited,
		"Reason": f.Reason, "Class": f.Class, "Since": r.FormValue("since"), "Classes": h.classNames()})
}

// selection is a replay's selection as its form gives it: the checked
// letters, a reason or all, within the filters' class and since.
type selection struct {
	Mode   string // selected, reason or all
	IDs    []string
	Reason string
	Class  string
	Since  string
}

func (s selection) String() string {
	var b strings.Builder
	switch s.Mode {
	case "selected":
		b.WriteString("ids=" + strings.Join(s.IDs, ","))
	case "reason":
		b.WriteString("reason=" + s.Reason)
	default:
		b.WriteString("all")
	}
	if s.Class != "" {
		b.WriteString(" class=" + s.Class)
	}
	if s.Since != "" {
		b.WriteString(" since=" + s.Since)
	}
	return b.String()
}

// replay dry-runs a selection, or replays what a dry run listed: the
// dry run's page carries the ids it would replay, signed (dryRunProof),
// and the replay takes those ids and no selection, so it replays what the
// operator saw and nothing the letters' arrival since would add. A
// replay without a dry run's ids is refused.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) {
	if r.FormValue("dry_run") != "1" {
		h.replayListed(w, r)
		return
	}
	sel := selection{Mode: r.FormValue("mode"), IDs: r.Form["id"], Reason: r.FormValue("reason"), Class: r.FormValue("class"), Since: r.FormValue("since")}
	if !h.allowed(w, r, Operator, "dry_run", sel.String()) {
		return
	}
	f, err := filterOf(r)
	switch {
	case err != nil:
	case sel.Mode == "selected" && len(sel.IDs) == 0:
		err = fmt.Errorf("no dead letter selected")
	case sel.Mode == "reason" && sel.Reason == "":
		err = fmt.Errorf("no reason given")
	case sel.Mode != "selected" && sel.Mode != "reason" && sel.Mode != "all":
		err = fmt.Errorf("mode %q: want selected, reason or all", sel.Mode)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The listing's class and since always select; the reason only by
	// reason, the ids only when selected.
	switch sel.Mode {
	case "selected":
		f.IDs, f.Reason = sel.IDs, ""
	case "all":
		f.Reason = ""
	}
	results, sum, err := h.runReplay(w, r, f, true)
	outcome := "ok"
	if err != nil || sum.Failed > 0 {
		outcome = "error"
	}
	h.auditDetail(r.Context(), userOf(r), "dry_run", sel.String(), outcome, sum.String())
	if err != nil {
		h.fail(w, r, "dry-running the replay", err)
		return
	}
	// The ids the replay would act on, each once: those it would send,
	// and those already sent, whose dead letter it would ack.
	var listed []string
	for _, res := range results {
		acts := res.Action == deadletter.Replayed || (res.Action == deadletter.Skipped && res.Reason == deadletter.SkipSent)
		if acts && res.ID != "" && !slices.Contains(listed, res.ID) {
			listed = append(listed, res.ID)
		}
	}
	at := time.Now().Unix()
	h.render(w, r, "replay", map[string]any{"Results": results, "Summary": sum.String(), "DryRun": true,
		"Listed": listed, "At": at, "Proof": h.proof.sign(userOf(r).Name, at, listed)})
}

// replayListed replays the ids a dry run listed (replay), those still
// dead-lettered, and says which are gone.
func (h *Handler) replayListed(w http.ResponseWriter, r *http.Request) {
	ids := r.Form["letter"]
	target := "ids=" + strings.Join(ids, ",")
	if !h.allowed(w, r, Operator, "replay", target) {
		return
	}
	at, _ := strconv.ParseInt(r.FormValue("at"), 10, 64)
	if len(ids) == 0 || !h.proof.valid(r.FormValue("proof"), userOf(r).Name, at, ids, time.Now()) {
		h.audit(r.Context(), userOf(r), "replay", target, "refused")
		http.Error(w, "a replay replays the letters its dry run listed: dry-run first from the dead letters page "+
			"(no dry run's list here, or one older than "+dryRunValid.String()+", made for another user or by an earlier console)",
			http.StatusBadRequest)
		return
	}
	results, sum, err := h.runReplay(w, r, deadletter.Filter{IDs: ids}, false)
	seen := map[string]bool{}
	for _, res := range results {
		seen[res.ID] = true
	}
	var gone []string
	for _, id := range ids {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	outcome, detail := "ok", sum.String()
	if err != nil || sum.Failed > 0 {
		outcome = "error"
	}
	if len(gone) > 0 {
		detail += "; gone since the dry run: " + strings.Join(gone, ",")
	}
	h.auditDetail(r.Context(), userOf(r), "replay", target, outcome, detail)
	if err != nil {
		h.fail(w, r, "replaying the dead letters", err)
		return
	}
	h.render(w, r, "replay", map[string]any{"Results": results, "Summary": sum.String(), "Gone": gone})
}

// runReplay runs deadletter.Replay over the letters f selects, a dry run
// or not, and returns each selected letter's result.
func (h *Handler) runReplay(w http.ResponseWriter, r *http.Request, f deadletter.Filter, dry bool) ([]deadletter.Result, deadletter.Summary, error) {
	// A replay of many letters outlasts the server's write timeout.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(replayBound))
	opts := operator.Replay(h.o.Redis, h.o.Settings, h.routing, h.o.Timeout, h.logger)
	opts.Inspect, opts.Filter = operator.Inspect(h.o.Settings, h.o.DeadLetterWait, 0), f
	opts.MaxReplays, opts.DryRun = 3, dry
	var results []deadletter.Result
	sum, err := deadletter.Replay(r.Context(), h.o.PubSub, opts, func(res deadletter.Result) { results = append(results, res) })
	return results, sum, err
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

// listView is one list of page 4.
type listView struct {
	Name, Title string
	Missing     string // why the list is not configured; "" when it is
	Columns     []string
	Rows        []listRow
	RowActions  []string // on a row: remove, release, drop, unblock
	NewActions  []string // of a new key: add, block
	Reason      bool     // the actions need a reason
	Query       string   // as shown: a whole number masked
	Err         string
	Operator    bool // the user may act
}

// listRow is a row as shown, and the token its actions post.
type listRow struct {
	Cells []string
	Token string // the row's key sealed (Handler.tokens); "" for a user who may not act
}

// namedList is a List with its URL name, title and what its absence
// means.
type namedList struct {
	name, title, missing string
	list                 List
}

// listsOf are page 4's lists, by their URL name.
func (h *Handler) listsOf() []namedList {
	return []namedList{
		{"optouts", "Opt-outs", "The suppression list is not wired in (docs/suppressions.md).", h.o.Lists.OptOuts},
		{"deferred", "Deferred messages", "No class has send windows or a cap (docs/windows.md).", h.o.Lists.Deferred},
		{"blocks", "Guard blocks", "No class has guard rules (docs/guard.md).", h.o.Lists.Blocks},
	}
}

// numberKeyed reports whether list name's key is a phone number: masked
// on the page and in the audit, its rows acted on by token.
func numberKeyed(name string) bool { return name == "optouts" }

// shownKey is a key of list name as the page and the audit show it.
func shownKey(name, key string) string {
	if numberKeyed(name) && key != "" {
		return provider.MaskNumber(key)
	}
	return key
}

// listRows bounds the rows each list shows.
const listRows = 200

// newKeyActions are the actions of a new key rather than of a row.
var newKeyActions = []string{"add", "block"}

// lists is page 4: opt-outs, deferred messages and guard blocks, each
// searchable, or said not configured. Numbers show masked to every role:
// an operator's row action posts the row's token, never the number, and
// a new opt-out is typed.
func (h *Handler) lists(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	u := userOf(r)
	var views []listView
	for _, l := range h.listsOf() {
		query := q.Get(l.name)
		v := listView{Name: l.name, Title: l.title, Query: query, Operator: u.MayAct()}
		if _, err := suppress.Key(query); err == nil {
			v.Query = shownKey(l.name, query)
		}
		if l.list == nil {
			v.Missing = l.missing
			views = append(views, v)
			continue
		}
		v.Columns, v.Reason = l.list.Columns(), l.name == "optouts"
		for _, a := range l.list.Actions() {
			if slices.Contains(newKeyActions, a) {
				v.NewActions = append(v.NewActions, a)
			} else {
				v.RowActions = append(v.RowActions, a)
			}
		}
		// An operator's rows are read with their keys in clear, for the
		// tokens; the page shows them masked.
		rows, err := l.list.Search(r.Context(), query, listRows, v.Operator)
		if err != nil {
			v.Err = err.Error()
		}
		for _, row := range rows {
			shown := listRow{Cells: slices.Clone(row)}
			if len(row) > 0 {
				shown.Cells[0] = shownKey(l.name, row[0])
				if v.Operator {
					shown.Token = h.tokens.seal(l.name, row[0])
				}
			}
			v.Rows = append(v.Rows, shown)
		}
		views = append(views, v)
	}
	h.render(w, r, "lists", views)
}

// listAction applies an operator's action to a list's row (its token) or
// of a new key (typed): operators only, audited with what it did, a
// number masked.
func (h *Handler) listAction(w http.ResponseWriter, r *http.Request) {
	name, action, key := r.PathValue("list"), r.PathValue("action"), strings.TrimSpace(r.FormValue("key"))
	sealed := true // the row's token, if any, is this console's
	if tok := r.FormValue("token"); key == "" && tok != "" {
		key, sealed = h.tokens.open(name, tok)
	}
	if !h.allowed(w, r, Operator, name+"."+action, shownKey(name, key)) {
		return
	}
	lists := h.listsOf()
	i := slices.IndexFunc(lists, func(l namedList) bool { return l.name == name })
	if i < 0 || lists[i].list == nil || !slices.Contains(lists[i].list.Actions(), action) {
		http.Error(w, "no such list or action", http.StatusNotFound)
		return
	}
	if !sealed {
		http.Error(w, "the row's token is not this console's (restarted since the page was read): search the list again", http.StatusBadRequest)
		return
	}
	a := Action{Name: action, Key: key, Reason: strings.TrimSpace(r.FormValue("reason"))}
	if s := r.FormValue("for"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			http.Error(w, fmt.Sprintf("for %q: want a duration such as 1h", s), http.StatusBadRequest)
			return
		}
		a.For = d
	}
	did, err := lists[i].list.Act(r.Context(), a)
	outcome := "ok"
	if err != nil {
		outcome, did = "error", err.Error()
	}
	shown := shownKey(name, key)
	h.auditDetail(r.Context(), userOf(r), name+"."+action, shown, outcome, did)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		h.render(w, r, "error", map[string]any{"What": action + " " + shown, "Err": err.Error()})
		return
	}
	// Back to the list, searched for the key: a number by its last four
	// digits, so that the URL holds no number.
	search := key
	if numberKeyed(name) {
		search = key[max(len(key)-4, 0):]
	}
	http.Redirect(w, r, h.o.Path+"/lists?"+url.Values{name: {search}}.Encode()+"#list-"+name, http.StatusSeeOther)
}

// accountConfig is an account's configuration as page 5 shows it: the
// fields named here and no other, so that no secret (tokens, keys, their
// files) can show.
type accountConfig struct {
	Name, Provider, RateUnit             string
	Classes                              []admission.Class
	ContractRPS, TargetRPS, MarketingRPS float64
	ClassRPS, ReserveRPS                 map[admission.Class]float64
	Burst, MaxInFlight, MaxSegments      int
	MinDeliveredRatio                    float64
	InForceRPS                           float64
	Override                             *status.Override
}

// configuration is page 5: the classes and their rules, accounts, routes
// and limits in force.
func (h *Handler) configuration(w http.ResponseWriter, r *http.Request) {
	rep, err := h.report(r.Context())
	if err != nil {
		h.fail(w, r, "reading the accounts' state in Redis", err)
		return
	}
	var accounts []accountConfig
	for i, a := range h.routing.Accounts {
		c := accountConfig{Name: a.Name, Provider: a.Provider, RateUnit: a.RateUnit, Classes: a.Classes,
			ContractRPS: a.ContractRPS, TargetRPS: a.TargetRPS, MarketingRPS: a.MarketingRPS, ClassRPS: a.ClassRPS, ReserveRPS: a.ReserveRPS,
			Burst: a.Burst, MaxInFlight: a.MaxInFlight, MaxSegments: a.MaxSegments, MinDeliveredRatio: a.MinDeliveredRatio}
		if i < len(rep.Accounts) {
			c.InForceRPS, c.Override = rep.Accounts[i].InForceRPS, rep.Accounts[i].Override
		}
		accounts = append(accounts, c)
	}
	h.render(w, r, "config", map[string]any{"Classes": h.o.Settings.ClassList(), "Rules": rulesOf(h.o.Settings.Process),
		"Accounts": accounts, "Route": rep.Route, "Routes": rep.Routes})
}
