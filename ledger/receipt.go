package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one verified delivery receipt, in the fold's terms.
type Report struct {
	ProviderID string
	// Status is one of the 11 names of provider.DeliveryStatus, or
	// StatusSuppressed.
	Status string
	// Final and Delivered say what Status is; Receipt refuses a Report
	// whose flags disagree with it.
	Final, Delivered bool
	ErrorCode        string
	// RouteFailed says a final failure's code names the route (a
	// carrier's filter), not the recipient (provider.DeliveryReport's
	// RouteFailed): only such a failure counts against the route
	// (RouteRule).
	RouteFailed bool
	// Again says the receipt is the provider's retry of one this process
	// answered 503, whose fold Redis may have run all the same: a final
	// that changes nothing hands its owed event out at once, however
	// recently it was owed, since no fold is publishing it.
	Again bool
	At    time.Time // zero: Redis's clock at the fold
}

// Fold is what a receipt did to its message (receipt.lua's reply), or, from
// Owed, a message whose status event is owed.
type Fold struct {
	Known             bool // false: no record of the provider id (expired, another system): nothing written
	ID, Class, Sender string
	ProviderID        string // the message's first provider id
	Status            string // the message's state after the fold
	ErrorCode         string
	SentAt, StatusAt  time.Time
	Final             bool // Status is final
	Changed           bool // this receipt changed the message's state
	// Owed says a status event is owed for this state (it became final
	// now, or a failure turned delivered): publish it, then EventPublished.
	Owed bool
	// Resend is non-nil once, with the Owed that made a first-class
	// message's failure final while its resend payload lived: publish it
	// to the first class's topic. It is handed out once, taken from
	// Redis: a publish that fails gives it back (GiveBackResend), and a
	// sweep (Owed) hands it out again with its event.
	Resend  []byte
	Account string // the account the fold ran on

	version int64  // the owed event's version, for EventPublished
	story   string // the story's key, for GiveBackResend
	// dlr and counted are what the fold counted: the delivery counters'
	// key after the tag ('dlr:<class>:<unix minute>', "" none) and its
	// fields, space-separated, one each; the Ledger writes them later
	// (counts.go).
	dlr, counted string
}

// StatusSuppressed is the final state of a message its provider refused
// for the recipient's opt-out (a Vonage receipt with err-code 9): a
// failure that is never resent (its resend payload is dropped), whose
// status event says suppressed, as a message the list stopped does.
const StatusSuppressed = "suppressed"

// Delivery statuses as receipt.lua folds them, final or intermediate.
var deliveryStatuses = map[string]bool{
	"queued": false, "accepted": false, "sending": false, "sent": false, "buffered": false, "unknown": false,
	"delivered": true, "undelivered": true, "failed": true, "expired": true, "rejected": true, StatusSuppressed: true,
}

// ErrBadReport reports a Report whose status is not one the fold knows
// (the 11 names of provider.DeliveryStatus, and StatusSuppressed), or
// whose Final and Delivered disagree with it.
var ErrBadReport = errors.New("admission: a receipt's status is not one the fold knows")

// DeliveryBuckets are the upper bounds of the latency buckets the delivery
// counters keep (from the send, Fold.SentAt, to a delivered receipt);
// one more bucket counts the rest. DeliveryStats's quantiles are these
// bounds.
var DeliveryBuckets = []time.Duration{
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second,
	5 * time.Second, 7500 * time.Millisecond, 10 * time.Second, 15 * time.Second, 20 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
}

// deliveryBucketsArg is DeliveryBuckets as receipt.lua's ARGV[5].
var deliveryBucketsArg = func() string {
	b := make([]string, len(DeliveryBuckets))
	for i, d := range DeliveryBuckets {
		b[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return strings.Join(b, " ")
}()

// Bounds of what the Ledger keeps for the receipts.
const (
	MaxParts          = 64    // parts of a message kept in its story (receipt.lua's MAX_PARTS)
	maxErrorCode      = 64    // characters of a receipt's error code kept
	publishedPerCall  = 64    // published events cleared per receipt.lua call
	maxOwedRemembered = 10000 // ids whose owed versions are remembered for EventPublished
	maxVersionsPerID  = 4     // owed versions remembered per id
	maxOwedPerSweep   = 1000  // events one Owed call returns at most
	// handOutAfter is how long an event has been owed before a final
	// receipt that changes nothing hands it out again: a duplicate sooner
	// comes while the fold that owed it is publishing it; a provider's
	// retry of a receipt answered 503 comes later.
	handOutAfter = 250 * time.Millisecond
)

// clearEvery is how often a receipt's call carries the events published
// at most: their one ZREM is paid once per clearEvery, not per receipt. A
// sweep's and a flush's call carry them always.
const clearEvery = 100 * time.Millisecond

// Receipt folds r into its message's state in ONE Redis call (receipt.lua),
// also carrying, once clearEvery has passed since a call last did, the ids
// whose events were published (EventPublished) to clear them from the
// owed set, and the delivery counts due (counts.go). A provider id this
// account never kept (expired, another system's) is Fold.Known false.
func (g *Ledger) Receipt(ctx context.Context, r Report) (Fold, error) {
	final, ok := deliveryStatuses[r.Status]
	if !ok || r.Final != final || r.Delivered != (r.Status == "delivered") {
		return Fold{}, fmt.Errorf("%w: %q final %t delivered %t", ErrBadReport, r.Status, r.Final, r.Delivered)
	}
	if r.ProviderID == "" {
		return Fold{Account: g.cfg.Account}, nil
	}
	call := g.sweepCall()
	call.PID, call.Status, call.Code = g.pidKey(r.ProviderID), r.Status, r.ErrorCode[:min(len(r.ErrorCode), maxErrorCode)]
	call.RouteFailed = r.RouteFailed && r.Final && !r.Delivered
	if !r.Again {
		call.Age = g.handOutAfter.Milliseconds()
	}
	if !r.At.IsZero() {
		call.At = max(r.At.UnixMilli(), 1)
	}
	folds, changed, err := g.runReceipt(ctx, call, false)
	if err != nil {
		return Fold{}, err
	}
	if len(folds) == 0 {
		return Fold{Account: g.cfg.Account}, nil
	}
	folds[0].Changed = changed
	return folds[0], nil
}

// EventPublished notes that id's owed event is out; a Receipt within
// clearEvery, or the next Owed or FlushPublished, clears it. It clears the oldest event this
// Limiter returned for id (from Receipt or Owed) and not yet noted, and
// only while that is still the event owed: one owed since (a failure
// turned delivered) stays owed, and a sweep returns it again. Publishes
// that end out of order cost a duplicate event, never a lost one; so does
// an id this Ledger returned no event for.
func (g *Ledger) EventPublished(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	vs := g.owedSeen[id]
	if len(vs) == 0 {
		return
	}
	if len(vs) == 1 {
		delete(g.owedSeen, id)
	} else {
		g.owedSeen[id] = vs[1:]
	}
	g.published = append(g.published, id, strconv.FormatInt(vs[0], 10))
}

// GiveBackResend gives back the resend payload of f, a Fold whose Resend
// was not published, for a sweep to hand out again with its event. It
// reports whether it was given back: false when it is moot (the message
// was delivered after all, its story expired, or its event is no longer
// owed).
func (g *Ledger) GiveBackResend(ctx context.Context, f Fold) (bool, error) {
	call := givebackCall{Msg: f.story, Owed: g.key.Owed(), ID: f.ID, Payload: string(f.Resend)}
	var n int64
	err := g.do(ctx, func(ctx context.Context) (err error) {
		n, err = givebackScript.Run(ctx, g.rdb, call.keys(), call.argv()...).Int64()
		if err != nil {
			return fmt.Errorf("giveback eval: %w", err)
		}
		return nil
	})
	return n == 1, err
}

// FlushPublished clears from the owed set the events EventPublished noted,
// in as few calls as it takes (64 a call), and writes the delivery counts
// kept (counts.go) at once: a stopping process's last call.
func (g *Ledger) FlushPublished(ctx context.Context) error {
	for {
		g.mu.Lock()
		pending := len(g.published) + len(g.counts)
		g.mu.Unlock()
		if pending == 0 {
			return nil
		}
		if _, _, err := g.runReceipt(ctx, g.sweepCall(), true); err != nil {
			return err
		}
	}
}

// Owed returns up to n messages whose event has been owed for longer than
// age (a sweep publishes them again; Fold.Resend when a resend was given
// back, taken from Redis), and clears the events published meanwhile. n
// is at most 1000.
func (g *Ledger) Owed(ctx context.Context, age time.Duration, n int) ([]Fold, error) {
	call := g.sweepCall()
	call.Age, call.Most = max(age.Milliseconds(), 0), min(max(n, 0), maxOwedPerSweep)
	folds, _, err := g.runReceipt(ctx, call, false)
	return folds, err
}

// sweepCall is receipt.lua's call of a sweep that returns nothing: it
// only clears.
func (g *Ledger) sweepCall() receiptCall {
	return receiptCall{Owed: g.key.Owed(), Millis: g.cfg.RecordTTL.Milliseconds(), Buckets: deliveryBucketsArg, Route: g.cfg.Route}
}

// runReceipt runs call with the published events pending (a receipt's
// call: once clearEvery has passed since a call last carried some) and
// the delivery counts due (all of them with now; both put back if the
// call fails), remembers the owed versions it returns and keeps the
// counts it made.
func (g *Ledger) runReceipt(ctx context.Context, call receiptCall, now bool) ([]Fold, bool, error) {
	g.mu.Lock()
	if call.Status == "" || time.Since(g.cleared) >= clearEvery {
		call.Published = slices.Clone(g.published[:min(len(g.published), 2*publishedPerCall)])
		g.published = g.published[len(call.Published):]
		if len(call.Published) > 0 {
			g.cleared = time.Now()
		}
	}
	counts := g.takeCounts(now)
	g.mu.Unlock()
	call.Counts = counts.arg()
	var v []any
	err := g.do(ctx, func(ctx context.Context) (err error) {
		v, err = receiptScript.Run(ctx, g.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("receipt eval: %w", err)
		}
		return nil
	})
	if err == nil {
		var folds []Fold
		var changed bool
		if folds, changed, err = g.parseFolds(v); err == nil {
			g.rememberOwed(folds)
			g.keepCounts(folds)
			return folds, changed, nil
		}
	}
	g.mu.Lock()
	g.published = append(call.Published, g.published...)
	g.mu.Unlock()
	g.putBackCounts(counts)
	return nil, false, err
}

// rememberOwed keeps the owed versions of folds for EventPublished, a few
// per id, oldest first.
func (g *Ledger) rememberOwed(folds []Fold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range folds {
		vs, ok := g.owedSeen[f.ID]
		switch {
		case !f.Owed, len(vs) > 0 && vs[len(vs)-1] == f.version:
		case ok && len(vs) < maxVersionsPerID:
			g.owedSeen[f.ID] = append(vs, f.version)
		case !ok:
			if len(g.owedSeen) >= maxOwedRemembered {
				// Full of ids that may never be published here (another
				// process's sweep did, or their story expired): one goes,
				// an arbitrary one. Its event, if still owed, is published
				// again by a sweep, which returns it here again.
				for k := range g.owedSeen {
					delete(g.owedSeen, k)
					break
				}
			}
			g.owedSeen[f.ID] = []int64{f.version}
		}
	}
}

// parseFolds reads receipt.lua's {changed, message...}.
func (g *Ledger) parseFolds(v []any) ([]Fold, bool, error) {
	if len(v) == 0 {
		return nil, false, fmt.Errorf("%w: receipt.lua answered nothing", ErrBadReply)
	}
	changed, ok := v[0].(int64)
	if !ok {
		return nil, false, fmt.Errorf("%w: receipt.lua's changed is %T", ErrBadReply, v[0])
	}
	folds := make([]Fold, 0, len(v)-1)
	for _, m := range v[1:] {
		f, err := g.parseFold(m)
		if err != nil {
			return nil, false, err
		}
		folds = append(folds, f)
	}
	return folds, changed == 1, nil
}

// parseFold reads one message of receipt.lua's reply: {id, class, sender,
// first provider id, status, error code, sent_ms, status_ms, owed,
// version, resend, story key, counters' key, fields counted}.
func (g *Ledger) parseFold(m any) (Fold, error) {
	t, ok := m.([]any)
	if !ok || len(t) != 14 {
		return Fold{}, fmt.Errorf("%w: receipt.lua's message is %v", ErrBadReply, m)
	}
	var s [10]string
	for i, j := range []int{0, 1, 2, 3, 4, 5, 10, 11, 12, 13} {
		if s[i], ok = t[j].(string); !ok {
			return Fold{}, fmt.Errorf("%w: receipt.lua's message field %d is %T", ErrBadReply, j, t[j])
		}
	}
	var n [4]int64
	for i := range n {
		if n[i], ok = t[6+i].(int64); !ok {
			return Fold{}, fmt.Errorf("%w: receipt.lua's message field %d is %T", ErrBadReply, 6+i, t[6+i])
		}
	}
	final, known := deliveryStatuses[s[4]]
	if !known && s[4] != "" {
		return Fold{}, fmt.Errorf("%w: receipt.lua's status %q", ErrBadReply, s[4])
	}
	f := Fold{Known: true, ID: s[0], Class: s[1], Sender: s[2], ProviderID: s[3], Status: s[4], ErrorCode: s[5],
		SentAt: msTime(n[0]), StatusAt: msTime(n[1]), Final: final, Owed: n[2] == 1, version: n[3], Account: g.cfg.Account,
		story: s[7], dlr: s[8], counted: s[9]}
	if s[6] != "" {
		f.Resend = []byte(s[6])
	}
	return f, nil
}

// msTime is a time in milliseconds since the epoch; 0 is the zero time.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
