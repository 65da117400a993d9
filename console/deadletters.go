package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/deadletter"
	"smsdispatcher/internal/operator"
)

// Page 3, the dead letters: their list, a dry run and the replay of what
// it listed.

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
