package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
)

// Story is what a sent message's receipts need kept with its record. The
// zero Story keeps nothing.
type Story struct {
	// ID is the message's id; "" the id of the claim given to Admit. A
	// resend's claim is its own record (another id), its story the
	// message's.
	ID     string
	Class  string // the class's name ("otp", "marketing")
	Sender string // the sender it went from ("" the adapter's)
	// ProviderIDs are the provider's ids: Receipt.Parts, or {Receipt.ID};
	// empty: nothing kept. Empty ids are dropped, and at most 64 parts
	// kept.
	ProviderIDs []string
	// Prefix is the destination's country code ("+62"): a first-class
	// message's finals count toward its account's route to that prefix
	// (RouteRule). Other classes' is not kept.
	Prefix string
	// To is the destination number, for a first-class message with a
	// Prefix: its route's failures are judged on how many numbers they
	// went to. Only a short hash of it is kept (routeOf), never the
	// number.
	To          string
	Resend      []byte    // the message's Pub/Sub data, for a first-class message that may be sent once more
	ResendUntil time.Time // when that resend stops being worth it (zero: no resend)
}

// MessageStory is an id's whole story on this account, for `dispatcher
// message`.
type MessageStory struct {
	Account string
	// Record is the id's record: "sent", "claim", "refused:<reason>",
	// "rejected", or "" when there is none.
	Record   string
	Attempts int // the sends the record counted; 1 for a final record that counts none
	Class    string
	Sender   string
	// ProviderIDs are the parts' provider ids, in order.
	ProviderIDs []string
	SentAt      time.Time // when its send began (the slot its admission booked), on Redis's clock
	Status      string    // the receipts' state ("" none yet)
	ErrorCode   string
	StatusAt    time.Time
	Parts       map[string]string // provider id -> its part's status
	Owed        bool              // its status event is owed (not published yet)
	Resent      bool              // its resend payload was handed out
}

// Story returns id's whole story on this account; false when the account
// has nothing of it (no record, no story).
func (g *Ledger) Story(ctx context.Context, id string) (MessageStory, bool, error) {
	call := storyCall{Record: g.key.Record(id), Msg: g.key.Msg(id), Owed: g.key.Owed(), Resend: g.key.Resend(id), ID: id}
	var v []any
	err := g.do(ctx, func(ctx context.Context) (err error) {
		v, err = storyScript.RunRO(ctx, g.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("story eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return MessageStory{}, false, err
	}
	var (
		record string
		fields []any
		owed   int64
		ok     = len(v) == 4
	)
	if ok {
		record, ok = v[0].(string)
	}
	if ok {
		fields, ok = v[1].([]any)
	}
	if ok {
		owed, ok = v[2].(int64)
	}
	if !ok || len(fields)%2 != 0 {
		return MessageStory{}, false, fmt.Errorf("%w: story.lua answered %v", ErrBadReply, v)
	}
	h := make(map[string]string, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		k, _ := fields[i].(string)
		h[k], _ = fields[i+1].(string)
	}
	if record == "" && len(h) == 0 {
		return MessageStory{}, false, nil
	}
	s := MessageStory{Account: g.cfg.Account, Class: h["class"], Sender: h["sender"], Status: h["status"], ErrorCode: h["code"],
		SentAt: msTime(readBack(h["sent"])), StatusAt: msTime(readBack(h["at"])), Owed: owed == 1, Resent: h["resent"] == "1"}
	s.Record, s.Attempts = storyRecord(record)
	n := min(readBack(h["n"]), MaxParts)
	for i := int64(1); i <= n; i++ {
		p := h["p"+strconv.FormatInt(i, 10)]
		s.ProviderIDs = append(s.ProviderIDs, p)
		if s.Parts == nil {
			s.Parts = map[string]string{}
		}
		s.Parts[p] = h["s"+strconv.FormatInt(i, 10)]
	}
	return s, true, nil
}

// storyRecord reads an id's record as Redis keeps it ("<n>#<state>" when
// it counts sends) into MessageStory's Record and Attempts.
func storyRecord(v string) (string, int) {
	attempts := -1
	if c, state, ok := strings.Cut(v, "#"); ok {
		if n, err := strconv.Atoi(c); err == nil {
			attempts, v = max(n, 0), state
		}
	}
	switch {
	case v == RecordSent || strings.HasPrefix(v, sentPrefix):
		v = RecordSent
	case strings.HasPrefix(v, "claim:"):
		v = "claim"
	}
	if attempts < 0 {
		attempts = 0
		if v == RecordSent || v == RecordRejected || strings.HasPrefix(v, refusedPrefix) {
			attempts = 1
		}
	}
	return v, attempts
}

// readBack is a number read back from Redis, within [0, 2^53).
func readBack(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return min(max(n, 0), 1<<53-1)
}

// DeliveryStats is, for one class, the final receipts of the last minutes
// on an account.
type DeliveryStats struct {
	Finals, Delivered int64
	// P50 and P99 are the delivered messages' latency quantiles (from the
	// send, MessageStory.SentAt, to the delivered receipt), each the upper
	// bound of its bucket (DeliveryBuckets; past the last, the last
	// bound); 0 with none delivered.
	P50, P99 time.Duration
}

// DeliveryStats returns, per class that had a final receipt, the last
// window (whole minutes, the current one included, at most 10) of final
// receipts on this account.
func (g *Ledger) DeliveryStats(ctx context.Context, window time.Duration) (map[string]DeliveryStats, error) {
	call := deliveryCall{Owed: g.key.Owed(), Minutes: max(int64(window/time.Minute), 1),
		Minute: g.cfg.Now().Unix() / 60, Classes: g.cfg.Classes}
	var v []any
	err := g.do(ctx, func(ctx context.Context) (err error) {
		v, err = deliveryScript.RunRO(ctx, g.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("delivery eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(v) != len(call.Classes) {
		return nil, fmt.Errorf("%w: delivery.lua answered %d classes, want %d", ErrBadReply, len(v), len(call.Classes))
	}
	out := map[string]DeliveryStats{}
	for i, class := range call.Classes {
		fields, ok := v[i].([]any)
		if !ok || len(fields)%2 != 0 {
			return nil, fmt.Errorf("%w: delivery.lua answered %v", ErrBadReply, v[i])
		}
		// receipt.lua's counters: f failures, b<i> delivered, t failures
		// turned delivered; and, written before that form, finals and
		// delivered beside their own b<i>.
		var s DeliveryStats
		var failures, turned, oldFinals, oldDelivered int64
		buckets := make([]int64, len(DeliveryBuckets)+1)
		for j := 0; j < len(fields); j += 2 {
			k, _ := fields[j].(string)
			x, _ := fields[j+1].(string)
			n := readBack(x)
			switch {
			case k == "f":
				failures += n
			case k == "t":
				turned += n
			case k == "finals":
				oldFinals += n
			case k == "delivered":
				oldDelivered += n
			case strings.HasPrefix(k, "b"):
				if b, err := strconv.Atoi(k[1:]); err == nil && b >= 1 && b <= len(buckets) {
					buckets[b-1] += n
					s.Delivered += n
				}
			}
		}
		s.Finals = max(oldFinals+failures+s.Delivered-oldDelivered-turned, 0)
		if s.Finals == 0 && s.Delivered == 0 {
			continue
		}
		s.P50, s.P99 = quantile(buckets, 0.5), quantile(buckets, 0.99)
		out[class] = s
	}
	return out, nil
}

// quantile is the q quantile of the latencies counted in buckets (by
// DeliveryBuckets): the upper bound of the bucket it falls in.
func quantile(buckets []int64, q float64) time.Duration {
	var total int64
	for _, n := range buckets {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total-1)) + 1 // the rank-th smallest latency, 1-based
	var seen int64
	for i, n := range buckets {
		seen += n
		if seen >= rank {
			return DeliveryBuckets[min(i, len(DeliveryBuckets)-1)]
		}
	}
	return DeliveryBuckets[len(DeliveryBuckets)-1]
}

// MessageOf returns the id of the message a provider id of account k's
// names (the console's search by provider id), and whether one does: the
// story at the first part's key holds the id; a later part's key,
// '<part>\t<first provider id>', leads to it.
func MessageOf(ctx context.Context, rdb redis.Cmdable, k keys.Account, pid string) (string, bool, error) {
	for range 2 {
		v, err := rdb.Get(ctx, PIDKey(k, pid)).Result()
		if errors.Is(err, redis.Nil) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if _, first, ok := strings.Cut(v, "\t"); ok {
			pid = first
			continue
		}
		var story struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(v), &story) != nil || story.ID == "" {
			return "", false, nil
		}
		return story.ID, true, nil
	}
	return "", false, nil
}
