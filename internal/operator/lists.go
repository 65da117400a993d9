package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/guard"
	"smsdispatcher/provider"
	"smsdispatcher/suppress"
)

// The lists an operator searches and acts on besides the dead letters:
// the suppression list, each class's deferred messages and its guard's
// blocks. The dispatcher's suppressions, deferred and guard commands and
// the console's lists page change them through the functions here, so
// that a change is the same change from either.

// A List is one searchable list and its operator actions (the console's
// lists page shows each).
type List interface {
	// Columns name the rows' cells; the first cell is the row's key.
	Columns() []string
	// Search returns at most limit rows whose key contains query ("" every
	// row). Numbers in cells are masked to their last four digits unless
	// clear.
	Search(ctx context.Context, query string, limit int, clear bool) ([][]string, error)
	// Actions are the operator's actions: on a row ("remove", "release",
	// "drop", "unblock") or of a new key ("add", "block").
	Actions() []string
	// Act applies a and says what it did, in words.
	Act(ctx context.Context, a Action) (string, error)
}

// An Action is an operator's action on a list's row of Key.
type Action struct {
	Name, Key string
	// Reason is why (required by the suppression list's add and remove).
	Reason string
	// For is how long a block holds (0: DefaultBlock).
	For time.Duration
}

// DefaultBlock is how long an operator's block holds unless said
// (`dispatcher guard block --for`'s default).
const DefaultBlock = time.Hour

// ChangeSuppression adds number to the suppression list or removes it
// (action suppress.ActionAdd or ActionRemove) as an operator's change:
// source operator, through account ("" none), for reason. It reports
// whether the list changed.
func ChangeSuppression(ctx context.Context, store *suppress.Store, action, number, account, reason string) (bool, error) {
	if reason == "" {
		return false, errors.New("a reason is required")
	}
	e := suppress.Entry{Number: number, Source: suppress.SourceOperator, Account: account, Reason: reason}
	if action == suppress.ActionRemove {
		return store.Remove(ctx, e)
	}
	return store.Add(ctx, e)
}

// OptOuts is the suppression list as a List; Wait (may be nil) waits for
// a change's publish to the mirror (suppress.TopicMirror.Wait).
type OptOuts struct {
	Store *suppress.Store
	Wait  func(context.Context) error
}

func (OptOuts) Columns() []string {
	return []string{"number", "since", "source", "through", "reason"}
}

func (OptOuts) Actions() []string { return []string{suppress.ActionAdd, suppress.ActionRemove} }

// Search reads a whole number's entry alone; any other query reads the
// list in pages (the whole list when fewer than limit entries match),
// keeping the entries whose number contains it.
func (o OptOuts) Search(ctx context.Context, query string, limit int, clear bool) ([][]string, error) {
	row := func(e suppress.Entry) []string {
		n := e.Number
		if !clear {
			n = provider.MaskNumber(n)
		}
		return []string{n, e.At.Format(time.RFC3339), e.Source, e.Account, e.Reason}
	}
	if _, err := suppress.Key(query); err == nil {
		e, ok, err := o.Store.Get(ctx, query)
		if err != nil || !ok {
			return nil, err
		}
		return [][]string{row(e)}, nil
	}
	var rows [][]string
	for e, err := range o.Store.All(ctx) {
		if err != nil {
			return rows, err
		}
		if !strings.Contains(e.Number, query) {
			continue
		}
		if rows = append(rows, row(e)); len(rows) == limit {
			break
		}
	}
	return rows, nil
}

func (o OptOuts) Act(ctx context.Context, a Action) (string, error) {
	ctx = suppress.Batch(ctx) // Wait waits for this action's publish alone
	changed, err := ChangeSuppression(ctx, o.Store, a.Name, a.Key, "", a.Reason)
	if err != nil {
		return "", err
	}
	if o.Wait != nil {
		if err := o.Wait(ctx); err != nil {
			return "", fmt.Errorf("the list changed, but its publish failed: %w", err)
		}
	}
	what := map[bool]string{true: "added", false: "already on the list"}
	if a.Name == suppress.ActionRemove {
		what = map[bool]string{true: "removed", false: "not on the list"}
	}
	return what[changed], nil
}

// DeferringClasses are the classes of cfg's ACCOUNTS_FILE with send
// windows or a cap, or only the one named when it is one.
func DeferringClasses(cfg config.Settings, only string) ([]string, error) {
	p := cfg.Process
	if p.Lanes == nil && cfg.AccountsFile != "" {
		lanes, err := config.LoadClasses(p, cfg.AccountsFile)
		if err != nil {
			return nil, err
		}
		p.Lanes = lanes
	}
	var out []string
	for _, c := range p.ClassList() {
		if p.Policy(c.Name).Sending != (policy.Sending{}) && (only == "" || only == c.Name.String()) {
			out = append(out, c.Name.String())
		}
	}
	return out, nil
}

// DeferredOf returns class's deferred messages, or only id's; all of them
// are read, a page at a time, before any is acted on (a release moves
// them in the order the pages follow).
func DeferredOf(ctx context.Context, store *deferral.Store, class, id string) ([]deferral.Entry, error) {
	if id != "" {
		e, found, err := store.Get(ctx, class, id)
		if err != nil || !found {
			return nil, err
		}
		return []deferral.Entry{e}, nil
	}
	const page = 500
	var out []deferral.Entry
	for off := 0; ; off += page {
		list, _, err := store.List(ctx, class, off, page)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
		if len(list) < page {
			return out, nil
		}
	}
}

// ActOnDeferred releases id of class now ("release": sent when it comes
// back, whatever its window, within its cap) or drops it ("drop": its status
// event, dropped, published by the store's Events), and reports whether
// it was deferred.
func ActOnDeferred(ctx context.Context, store *deferral.Store, verb, class, id string) (bool, error) {
	switch verb {
	case "release":
		return store.ReleaseNow(ctx, class, id)
	case "drop":
		return store.Drop(ctx, class, id)
	}
	return false, fmt.Errorf("want release or drop, got %q", verb)
}

// Deferred is the deferred messages of Classes as a List, a row's key
// "class/id".
type Deferred struct {
	Store   *deferral.Store
	Classes []string
	// Status, if set, is STATUS_TOPIC's publisher: a drop publishes the
	// message's final status event there (DropEvents).
	Status *pubsub.Publisher
}

func (Deferred) Columns() []string {
	return []string{"class/id", "due", "deferred", "for its", "deadline"}
}

func (Deferred) Actions() []string { return []string{"release", "drop"} }

// Search keeps the messages whose "class/id" contains query.
func (d Deferred) Search(ctx context.Context, query string, limit int, _ bool) ([][]string, error) {
	var rows [][]string
	for _, c := range d.Classes {
		entries, err := DeferredOf(ctx, d.Store, c, "")
		if err != nil {
			return rows, err
		}
		for _, e := range entries {
			key := c + "/" + e.ID
			if !strings.Contains(key, query) {
				continue
			}
			deadline := ""
			if !e.Deadline.IsZero() {
				deadline = e.Deadline.UTC().Format(time.RFC3339)
			}
			rows = append(rows, []string{key, e.Due.UTC().Format(time.RFC3339), e.DeferredAt.UTC().Format(time.RFC3339), e.Reason, deadline})
			if len(rows) == limit {
				return rows, nil
			}
		}
	}
	return rows, nil
}

func (d Deferred) Act(ctx context.Context, a Action) (string, error) {
	class, id, ok := strings.Cut(a.Key, "/")
	if !ok || !slices.Contains(d.Classes, class) {
		return "", fmt.Errorf("%q: want class/id of a class with send windows or a cap", a.Key)
	}
	store, drops := d.Store, (*DropEvents)(nil)
	if a.Name == "drop" && d.Status != nil {
		drops = &DropEvents{Publisher: d.Status}
		store = store.WithEvents(drops)
	}
	found, err := ActOnDeferred(ctx, store, a.Name, class, id)
	if err != nil || !found {
		return "not deferred", err
	}
	if drops != nil {
		if _, err := drops.Err(); err != nil {
			return "dropped", fmt.Errorf("dropped, but its status event was not published: %w", err)
		}
	}
	return map[string]string{"release": "released", "drop": "dropped"}[a.Name], nil
}

// GuardedClasses are the names of classes with guard rules.
func GuardedClasses(classes []config.Class) []string {
	var out []string
	for _, c := range classes {
		if c.Guard.On() {
			out = append(out, c.Name.String())
		}
	}
	return out
}

// GuardTargets are the classes a guard command reads or changes: class
// when given, else every guarded class (one, the first, when it changes
// a block). Only a guarded class's processes read its blocks, so a block
// of any other class would be written and never enforced: refused.
func GuardTargets(classes []config.Class, class string, one bool) ([]string, error) {
	guarded := GuardedClasses(classes)
	switch {
	case len(guarded) == 0:
		return nil, errors.New("no class has guard rules (countries, deny_countries, max_per_prefix, min_conversion in ACCOUNTS_FILE's classes)")
	case class != "" && !slices.Contains(guarded, class):
		return nil, fmt.Errorf("class %q has no guard rules, so no process would enforce its blocks; the guarded classes: %s", class, strings.Join(guarded, ", "))
	case class != "":
		return []string{class}, nil
	case one:
		return guarded[:1], nil
	}
	return guarded, nil
}

// Blocks are the guard's blocks of Classes as a List, a row's key
// "class/+range".
type Blocks struct {
	Redis   guard.Redis
	Classes []string
}

func (Blocks) Columns() []string {
	return []string{"class/range", "reason", "until", "sends", "verified"}
}

func (Blocks) Actions() []string { return []string{"block", "unblock"} }

// Search keeps the blocks in force whose "class/+range" contains query.
func (b Blocks) Search(ctx context.Context, query string, limit int, _ bool) ([][]string, error) {
	var rows [][]string
	now := time.Now()
	for _, c := range b.Classes {
		blocks, err := guard.List(ctx, b.Redis, c, now)
		if err != nil {
			return rows, err
		}
		for _, x := range blocks {
			key := c + "/+" + x.Range
			if !strings.Contains(key, query) {
				continue
			}
			rows = append(rows, []string{key, x.Reason, x.Until.UTC().Format(time.RFC3339), strconv.Itoa(x.Sends), strconv.Itoa(x.Verified)})
			if len(rows) == limit {
				return rows, nil
			}
		}
	}
	return rows, nil
}

func (b Blocks) Act(ctx context.Context, a Action) (string, error) {
	class, prefix, ok := strings.Cut(a.Key, "/")
	if !ok || !slices.Contains(b.Classes, class) {
		return "", fmt.Errorf("%q: want class/+prefix of a guarded class", a.Key)
	}
	switch a.Name {
	case "block":
		d := a.For
		if d == 0 {
			d = DefaultBlock
		}
		now := time.Now()
		if err := guard.BlockRange(ctx, b.Redis, class, prefix, d, now); err != nil {
			return "", err
		}
		return "blocked (operator) until " + now.Add(d).UTC().Format(time.RFC3339), nil
	case "unblock":
		removed, err := guard.UnblockRange(ctx, b.Redis, class, prefix)
		if err != nil || !removed {
			return "no block; its counts forgotten", err
		}
		return "unblocked; its counts forgotten", nil
	}
	return "", fmt.Errorf("want block or unblock, got %q", a.Name)
}

// Deferral is an id's deferral in one class as dispatcher message shows
// it: held now by the store (State deferred), or ended, from its trace
// (deferral.Trace, kept deferral.TraceKeep past its end).
type Deferral struct {
	Class      string    `json:"class"`
	Reason     string    `json:"reason,omitempty"` // window or cap
	DeferredAt time.Time `json:"deferred_at,omitzero"`
	Until      time.Time `json:"until,omitzero"`
	// State is deferred while the store holds the id, else how its
	// deferral ended: released, expired or dropped.
	State string `json:"state"`
	// Due is, while deferred, when it is due for release (a claimed
	// one's: its claim's end).
	Due     time.Time `json:"due,omitzero"`
	EndedAt time.Time `json:"ended_at,omitzero"`
}

// Deferrals returns id's deferrals in every class of cfg with send
// windows or a cap, held now or ended within deferral.TraceKeep.
func Deferrals(ctx context.Context, rdb deferral.Redis, cfg config.Settings, id string) ([]Deferral, error) {
	classes, err := DeferringClasses(cfg, "")
	if err != nil {
		return nil, err
	}
	store := deferral.New(rdb, nil, nil)
	var out []Deferral
	for _, c := range classes {
		e, held, err := store.Get(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if held {
			out = append(out, Deferral{Class: c, Reason: e.Reason, DeferredAt: e.DeferredAt.UTC(), Until: e.Until.UTC(),
				State: "deferred", Due: e.Due.UTC()})
			continue
		}
		t, traced, err := store.TraceOf(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if traced && t.Ended != "" {
			out = append(out, Deferral{Class: c, Reason: t.Reason, DeferredAt: utc(t.DeferredAt), Until: utc(t.Until),
				State: t.Ended, EndedAt: utc(t.EndedAt)})
		}
	}
	return out, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Note is d in one line: `dispatcher message`'s (docs/windows.md).
func (d Deferral) Note() string {
	if d.State == "deferred" {
		return fmt.Sprintf("deferred (%s): class %s, since %s, due %s", d.Reason, d.Class,
			d.DeferredAt.Format(time.RFC3339), d.Due.Format(time.RFC3339))
	}
	s := "deferred"
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	s += ": class " + d.Class
	if !d.DeferredAt.IsZero() {
		s += fmt.Sprintf(", since %s until %s", d.DeferredAt.Format(time.RFC3339), d.Until.Format(time.RFC3339))
	}
	return s + fmt.Sprintf("; %s at %s", d.State, d.EndedAt.Format(time.RFC3339))
}

// SuppressedNote says when the suppression list stopped a message and by
// which entry (the number's, at, as suppress.Store.Refusal reads it), its
// number masked: `dispatcher message`'s line.
func SuppressedNote(at time.Time, e suppress.Entry) string {
	when := "(when: not recorded)"
	if !e.At.IsZero() {
		when = e.At.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("suppressed at %s: %s was on the suppression list since %s (%s)",
		at.UTC().Format(time.RFC3339), provider.MaskNumber(e.Number), when, DescribeEntry(e))
}

// DescribeEntry is an entry of the suppression list for a person: its
// source, the account it came through and its reason.
func DescribeEntry(e suppress.Entry) string {
	s := "source " + e.Source
	if e.Account != "" {
		s += ", through " + e.Account
	}
	if e.Reason != "" {
		s += ", reason " + fmt.Sprintf("%q", e.Reason)
	}
	return s
}

// BlockedNote says why the guard blocked the message id, when one of
// classes' guards did (within a day): `dispatcher message`'s line.
func BlockedNote(ctx context.Context, rdb guard.Redis, classes []config.Class, id string) (string, bool, error) {
	n, ok, err := guard.Noted(ctx, rdb, GuardedClasses(classes), id)
	if err != nil || !ok {
		return "", false, err
	}
	return BlockedLine(id, n), true, nil
}

// BlockedLine is BlockedNote's line of n, the guard's note of id.
func BlockedLine(id string, n guard.Note) string {
	return fmt.Sprintf("%s: blocked by the guard (%s), never sent; class %s, home %s, at %s", id, n.Reason, n.Class, n.Account, n.At.UTC().Format(time.RFC3339))
}
