package deferral

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
)

// Verdict is what Judge decided of a message.
type Verdict int

const (
	// Send: the message may go to admission now.
	Send Verdict = iota
	// Deferred: the store holds it until Judgement.Until; ack it.
	Deferred
	// Capped: over its cap with on_cap drop; ack it unsent.
	Capped
	// Expired: its window (or its cap) opens only after its deadline;
	// ack it unsent.
	Expired
)

// Message is one delivery as Judge reads it.
type Message struct {
	Class    string
	ID       string // the id its send-once record is kept under
	To       string
	TZ       string    // the producer's zone, "" for none
	Deadline time.Time // zero: none
	// Data and Attributes are the delivery's, Data with its id and
	// deadline written in (dispatch.WithID): its release is published
	// with them, as the same message.
	Data       []byte
	Attributes map[string]string
}

// Judgement is Judge's answer.
type Judgement struct {
	Verdict Verdict
	// Until is when a deferred message is due for release.
	Until time.Time
	// Reason is why it was not sent now: "window" or "cap".
	Reason string
	// tookPlace: the cap gave the message a new place, which GiveBack
	// returns when it is not sent.
	tookPlace bool
}

// Envelope is what the store keeps of a deferred message.
type Envelope struct {
	// Data is the message's data as published: a JSON object (Decode
	// checked it), kept as it is rather than in base64.
	Data       json.RawMessage   `json:"data"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Deadline   time.Time         `json:"deadline,omitzero"`
	DeferredAt time.Time         `json:"deferred_at"`
	Until      time.Time         `json:"until"`
	Reason     string            `json:"reason"`
}

// Redis is what the store asks of its client: scripts only.
type Redis interface {
	redis.Scripter
}

// Store is the deferral store of every class, in one Redis.
type Store struct {
	rdb    Redis
	now    func() time.Time
	events Events
	// Lease is how long a claim holds an id for its releaser (default
	// ClaimLease).
	Lease time.Duration
	// Expired, if set, counts a message that ends expired here
	// (sms_expired_total): its deadline comes before its release.
	Expired func(class string)
}

// Events publishes a message's status events (deferred, capped,
// expired, and dropped by an operator) to STATUS_TOPIC; nil publishes
// none.
type Events interface {
	Event(ctx context.Context, class, id, status string, until time.Time)
}

// New returns the store on rdb; now is its clock (nil: the system's).
func New(rdb Redis, now func() time.Time, events Events) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{rdb: rdb, now: now, events: events}
}

// WithEvents is the store with events in place of its own.
func (s *Store) WithEvents(events Events) *Store {
	c := *s
	c.events = events
	return &c
}

// Judge decides whether m may be sent now under its class's rules: in
// its window (rules.Window), then under its cap (rules.Cap). A message
// it defers is stored before Judge returns Deferred. The zero rules
// send everything. A message an operator released early (ReleaseNow)
// passes its window once, never its cap: a cap may be the law's (3 a day
// in Florida), a window released early is one configured wrong.
func (s *Store) Judge(ctx context.Context, m Message, rules policy.Sending) (Judgement, error) {
	now := s.now()
	if rules.Window != nil {
		next := rules.Window.Next(m.To, m.TZ, now)
		if next.IsZero() || next.After(now) {
			j, err := s.hold(ctx, m, now, spread(m.ID, next, m.Deadline, rules.ReleaseSpread), "window")
			if err != nil || j.Verdict != Send {
				return j, err
			}
			// Released early by an operator: past its window, not its cap.
		}
	}
	if rules.Cap.Count <= 0 {
		return Judgement{Verdict: Send}, nil
	}
	res, err := capScript.Run(ctx, s.rdb, []string{keys.RecipientSends(m.Class, m.To)},
		now.UnixMilli(), rules.Cap.Per.Milliseconds(), rules.Cap.Count, m.ID).Int64Slice()
	if err != nil {
		return Judgement{}, fmt.Errorf("deferral: cap: %w", err)
	}
	if res[0] == 1 {
		return Judgement{Verdict: Send, tookPlace: res[1] == 1}, nil
	}
	if rules.Cap.Drop {
		s.event(ctx, m, "capped", time.Time{})
		return Judgement{Verdict: Capped, Reason: "cap"}, nil
	}
	return s.hold(ctx, m, now, time.UnixMilli(res[1]), "cap")
}

// GiveBack returns the cap's place j took for m, when m was not handed to
// a provider after all (denied a slot, a duplicate, the process
// stopping).
func (s *Store) GiveBack(ctx context.Context, m Message, j Judgement) error {
	if !j.tookPlace {
		return nil
	}
	return uncapScript.Run(ctx, s.rdb, []string{keys.RecipientSends(m.Class, m.To)}, m.ID).Err()
}

// spread is the release of id at a window's opening next, spread over
// over by the id's hash: a million messages deferred to one opening do
// not all wake in one second. With a deadline, the spread is capped at
// half the time from the opening to the deadline: a message whose window
// opens before its deadline is released, not expired by its share of the
// spread, and keeps at least as long again for its release and its send.
// Zero next (the window never opens) stays zero.
func spread(id string, next, deadline time.Time, over time.Duration) time.Time {
	if !deadline.IsZero() && !next.IsZero() {
		over = min(over, deadline.Sub(next)/2)
	}
	if next.IsZero() || over <= 0 {
		return next
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return next.Add(time.Duration(h.Sum64() % uint64(over)))
}

// hold stores m until until, or ends it expired when until (its window
// never opening: zero) is not before its deadline.
func (s *Store) hold(ctx context.Context, m Message, now, until time.Time, reason string) (Judgement, error) {
	if until.IsZero() || (!m.Deadline.IsZero() && !until.Before(m.Deadline)) {
		s.expired(ctx, m)
		return Judgement{Verdict: Expired, Reason: reason}, nil
	}
	env, err := json.Marshal(Envelope{Data: m.Data, Attributes: m.Attributes, Deadline: m.Deadline,
		DeferredAt: now, Until: until, Reason: reason})
	if err != nil {
		return Judgement{}, err
	}
	k := keys.DeferredOf(m.Class)
	stored, err := deferScript.Run(ctx, s.rdb, []string{k.Due(), k.Messages(), k.Claims(), k.Forced(), k.Trace(m.ID)},
		m.ID, until.UnixMilli(), env, now.UnixMilli(), reason, TraceKeep.Milliseconds()).Int()
	if err != nil {
		return Judgement{}, fmt.Errorf("deferral: store: %w", err)
	}
	if stored == 0 { // released early by an operator
		return Judgement{Verdict: Send}, nil
	}
	s.event(ctx, m, "deferred", until)
	return Judgement{Verdict: Deferred, Until: until, Reason: reason}, nil
}

// expired ends m expired: its status event and its count.
func (s *Store) expired(ctx context.Context, m Message) {
	s.event(ctx, m, "expired", time.Time{})
	if s.Expired != nil {
		s.Expired(m.Class)
	}
}

func (s *Store) event(ctx context.Context, m Message, status string, until time.Time) {
	if s.events != nil {
		s.events.Event(context.WithoutCancel(ctx), m.Class, m.ID, status, until)
	}
}

// A Claimed message is one a releaser took for release.
type Claimed struct {
	ID    string
	Token string
	Envelope
}

// ClaimLease is how long a claimed id is held for its releaser: past it,
// any process releases it (a releaser killed mid-release), within the
// 30 s docs/contract.md promises with a releaser's pass of a second.
const ClaimLease = 20 * time.Second

// Claim takes up to n ids of class due now for release, under token.
func (s *Store) Claim(ctx context.Context, class string, n int, token string) ([]Claimed, error) {
	now, lease := s.now(), s.Lease
	if lease <= 0 {
		lease = ClaimLease
	}
	k := keys.DeferredOf(class)
	res, err := claimScript.Run(ctx, s.rdb, []string{k.Due(), k.Messages(), k.Claims()},
		now.UnixMilli(), n, now.Add(lease).UnixMilli(), token).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("deferral: claim: %w", err)
	}
	out := make([]Claimed, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		c := Claimed{ID: res[i], Token: token}
		if err := json.Unmarshal([]byte(res[i+1]), &c.Envelope); err != nil {
			c.Envelope = Envelope{} // unreadable: the releaser drops it
		}
		out = append(out, c)
	}
	return out, nil
}

// Drop removes id of class for good (an operator's drop: a campaign
// cancelled), ends its trace dropped and publishes its final status
// event, dropped. It reports whether id was deferred.
func (s *Store) Drop(ctx context.Context, class, id string) (bool, error) {
	removed, err := s.removeEnded(ctx, class, "", EndDropped, []string{id})
	dropped := len(removed) == 1 && removed[0]
	if dropped {
		s.event(ctx, Message{Class: class, ID: id}, EndDropped, time.Time{})
	}
	return dropped, err
}

// Remove forgets id of class once released, while token still claims
// it; token "" removes it whatever. It reports whether it was removed.
// It leaves the id's trace as it is: Drop and the releaser end it.
func (s *Store) Remove(ctx context.Context, class, id, token string) (bool, error) {
	removed, err := s.RemoveAll(ctx, class, token, []string{id})
	return len(removed) == 1 && removed[0], err
}

// removePage is the most ids one remove call takes: the script hands
// them to Redis's commands with unpack, which stops near 8,000 values.
const removePage = 1000

// RemoveAll forgets ids of class once released, those token still
// claims (token "": every one), in one script call per removePage ids.
// removed[i] says whether ids[i] was removed; on an error it holds the
// pages done before it, and the ids after stay stored (released again
// at their claim's end: the send-once record makes that harmless).
func (s *Store) RemoveAll(ctx context.Context, class, token string, ids []string) (removed []bool, err error) {
	k := keys.DeferredOf(class)
	removed = make([]bool, 0, len(ids))
	for page := range slices.Chunk(ids, removePage) {
		args := make([]any, 0, 1+len(page))
		args = append(args, token)
		for _, id := range page {
			args = append(args, id)
		}
		res, err := removeScript.Run(ctx, s.rdb, []string{k.Due(), k.Messages(), k.Claims()}, args...).Int64Slice()
		if err != nil {
			return removed, fmt.Errorf("deferral: remove: %w", err)
		}
		for _, n := range res {
			removed = append(removed, n == 1)
		}
	}
	return removed, nil
}

// How a deferral ended, in its trace.
const (
	EndReleased = "released" // republished to its class's topic
	EndExpired  = "expired"  // its deadline came before its release
	EndDropped  = "dropped"  // by an operator, or its envelope unreadable
)

// TraceKeep is how long a deferral's trace outlives its end (and, while
// it is deferred, its due time): as long as the id's send-once record
// lives (24 h), so that dispatcher message tells both.
const TraceKeep = 24 * time.Hour

// Trace is what the store remembers of an id's deferral once its entry
// is gone: deferred when, until when and why, and how and when it ended.
// While the id is deferred, Ended is "".
type Trace struct {
	DeferredAt time.Time
	Until      time.Time
	Reason     string
	Ended      string // EndReleased, EndExpired or EndDropped
	EndedAt    time.Time
}

// end ends the traces of ids of class, a page of removePage at a time.
// It follows the remove that took them from the store, in a call of its
// own: a process that dies between the two leaves a trace that says
// deferred and no end, which the store and the id's record correct.
func (s *Store) end(ctx context.Context, class, how string, ids []string) error {
	k := keys.DeferredOf(class)
	now := s.now().UnixMilli()
	for page := range slices.Chunk(ids, removePage) {
		traces := make([]string, len(page))
		for i, id := range page {
			traces[i] = k.Trace(id)
		}
		if err := endedScript.Run(ctx, s.rdb, traces, how, now, TraceKeep.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("deferral: end traces: %w", err)
		}
	}
	return nil
}

// removeEnded removes ids of class (RemoveAll) and ends the traces of
// those removed as how; it returns RemoveAll's answer.
func (s *Store) removeEnded(ctx context.Context, class, token, how string, ids []string) ([]bool, error) {
	removed, err := s.RemoveAll(ctx, class, token, ids)
	var gone []string
	for i, ok := range removed {
		if ok {
			gone = append(gone, ids[i])
		}
	}
	if len(gone) > 0 {
		if terr := s.end(ctx, class, how, gone); err == nil {
			err = terr
		}
	}
	return removed, err
}

// TraceOf returns id's deferral trace in class; found is false when there
// is none (never deferred there, or ended more than TraceKeep ago).
func (s *Store) TraceOf(ctx context.Context, class, id string) (t Trace, found bool, err error) {
	res, err := traceScript.RunRO(ctx, s.rdb, []string{keys.DeferredOf(class).Trace(id)}).Slice()
	if err != nil {
		return Trace{}, false, fmt.Errorf("deferral: trace: %w", err)
	}
	if len(res) != 5 {
		return Trace{}, false, fmt.Errorf("deferral: trace: %d values, want 5", len(res))
	}
	field := func(i int) string { v, _ := res[i].(string); return v }
	ms := func(i int) time.Time {
		n, err := strconv.ParseInt(field(i), 10, 64)
		if err != nil {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	t = Trace{DeferredAt: ms(0), Until: ms(1), Reason: field(2), Ended: field(3), EndedAt: ms(4)}
	return t, t != Trace{}, nil
}

// Entry is one deferred message as List shows it.
type Entry struct {
	ID  string
	Due time.Time // its release (a claimed one's: the claim's end)
	Envelope
}

// List returns the page of class's deferred messages from offset, by due
// time, and how many are deferred in all.
func (s *Store) List(ctx context.Context, class string, offset, count int) ([]Entry, int, error) {
	k := keys.DeferredOf(class)
	res, err := listScript.RunRO(ctx, s.rdb, []string{k.Due(), k.Messages()}, offset, count).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("deferral: list: %w", err)
	}
	if len(res) == 0 {
		return nil, 0, errors.New("deferral: list: empty reply")
	}
	total, _ := res[0].(int64)
	var out []Entry
	for i := 1; i+2 < len(res); i += 3 {
		id, _ := res[i].(string)
		due, _ := res[i+1].(string)
		env, _ := res[i+2].(string)
		ms, _ := strconv.ParseFloat(due, 64)
		e := Entry{ID: id, Due: time.UnixMilli(int64(ms))}
		_ = json.Unmarshal([]byte(env), &e.Envelope)
		out = append(out, e)
	}
	return out, int(total), nil
}

// ReleaseNow makes id of class due at once (an operator's early release):
// when it comes back it is sent whatever its window says, within its
// cap (one held by its cap is deferred again until a place frees). It
// reports whether id was deferred.
func (s *Store) ReleaseNow(ctx context.Context, class, id string) (bool, error) {
	k := keys.DeferredOf(class)
	n, err := dueScript.Run(ctx, s.rdb, []string{k.Due(), k.Forced()}, id, s.now().UnixMilli()).Int()
	return n == 1, err
}

// Get returns id's entry in class's store; found is false when it is not
// deferred.
func (s *Store) Get(ctx context.Context, class, id string) (e Entry, found bool, err error) {
	k := keys.DeferredOf(class)
	res, err := getScript.RunRO(ctx, s.rdb, []string{k.Due(), k.Messages()}, id).StringSlice()
	if err != nil || len(res) < 2 {
		return Entry{}, false, err
	}
	ms, _ := strconv.ParseFloat(res[0], 64)
	e = Entry{ID: id, Due: time.UnixMilli(int64(ms))}
	_ = json.Unmarshal([]byte(res[1]), &e.Envelope)
	return e, true, nil
}

// Overdue is how long past its release a deferred message counts as
// stuck (SMSDeferredStuck).
const Overdue = 15 * time.Minute

// Stats is a class's deferred messages in short.
type Stats struct {
	Class    string
	Deferred int
	// Overdue counts those due more than Overdue ago and not released.
	Overdue int
	// Next are the next releases, soonest first.
	Next []Entry
}

// StatsOf returns class's stats with its next n releases.
func (s *Store) StatsOf(ctx context.Context, class string, n int) (Stats, error) {
	k := keys.DeferredOf(class)
	res, err := statsScript.RunRO(ctx, s.rdb, []string{k.Due()}, s.now().Add(-Overdue).UnixMilli(), n).Slice()
	if err != nil || len(res) < 2 {
		return Stats{}, fmt.Errorf("deferral: stats: %v", err)
	}
	st := Stats{Class: class}
	total, _ := res[0].(int64)
	over, _ := res[1].(int64)
	st.Deferred, st.Overdue = int(total), int(over)
	for i := 2; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		due, _ := res[i+1].(string)
		ms, _ := strconv.ParseFloat(due, 64)
		st.Next = append(st.Next, Entry{ID: id, Due: time.UnixMilli(int64(ms))})
	}
	return st, nil
}
