package loadharness

// The failover scenario's traffic: what it publishes, the primary's storm,
// and the log of what became of each message.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// The ids of the messages the scenario publishes.
const (
	otpIDPrefix       = "otp-"
	marketingIDPrefix = "mkt-"
)

// publishBacklog publishes n marketing messages and waits until Pub/Sub
// has them all.
func publishBacklog(ctx context.Context, admin *pubsub.Client, n int) error {
	mkt := admin.Publisher(failoverTopology.MarketingTopic)
	defer mkt.Stop()
	rs := make([]*pubsub.PublishResult, n)
	for i := range rs {
		rs[i] = mkt.Publish(ctx, &pubsub.Message{Data: failoverMessage(marketingIDPrefix+strconv.Itoa(i), "Winter sale: 20% off", time.Time{})})
	}
	for _, r := range rs {
		if _, err := r.Get(ctx); err != nil {
			return fmt.Errorf("publish the marketing backlog: %w", err)
		}
	}
	return nil
}

// feedOTP publishes OTPs at rate until ctx ends, logging each one's
// publish time, and returns the first publish error.
func feedOTP(ctx context.Context, otp *pubsub.Publisher, rate float64, lg *failoverLog) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var results []*pubsub.PublishResult
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			for _, r := range results {
				if _, err := r.Get(context.WithoutCancel(ctx)); err != nil {
					return fmt.Errorf("publish an OTP: %w", err)
				}
			}
			return nil
		case <-tick.C:
		}
		id := otpIDPrefix + strconv.Itoa(n)
		now := time.Now()
		lg.published(id, now)
		results = append(results, otp.Publish(ctx, &pubsub.Message{Data: failoverMessage(id, "Your code is 482913", now.Add(failoverOTPLife))}))
	}
}

// failoverMessage is a message's data; a zero deadline is none.
func failoverMessage(id, body string, deadline time.Time) []byte {
	m := map[string]string{"id": id, "to": "+819012345678", "body": body}
	if !deadline.IsZero() {
		m["deadline"] = deadline.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(m)
	return b
}

// stormFault stands in front of the primary's simulator: it logs every
// request's arrival, and a request that arrives while it hangs gets no
// answer for stormHangAnswer, then a 503 (the client may give up first, at
// its timeout): a request sent in the hang may fail after the provider
// recovered. Safe for concurrent use.
type stormFault struct {
	mu    sync.Mutex
	until time.Time   // guarded by mu: no answer before it
	log   []time.Time // guarded by mu: every request's arrival
}

// stormHangAnswer is how long a request that arrived during a hang waits
// for its answer, a 503.
const stormHangAnswer = 12 * time.Second

func (f *stormFault) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		f.mu.Lock()
		f.log = append(f.log, now)
		hang := now.Before(f.until)
		f.mu.Unlock()
		if !hang {
			next.ServeHTTP(w, r)
			return
		}
		// net/http notices a client that hangs up only once the body is read.
		io.Copy(io.Discard, r.Body)
		t := time.NewTimer(stormHangAnswer)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
}

// hangUntil makes every request that arrives before t go unanswered.
func (f *stormFault) hangUntil(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = t
}

// requests returns the arrival of every request so far.
func (f *stormFault) requests() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.log...)
}

// failoverLog is what a failover run records besides the simulators: the
// OTPs' publish times, the storm's span, and the ends the dispatchers
// observed. It is the dispatchers' Observer, safe for concurrent use;
// the fields below mu are written before the dispatchers start or after
// they stopped.
type failoverLog struct {
	mu           sync.Mutex
	otp          map[string]time.Time // guarded by mu: OTP id -> its publish time
	ended        map[string]nack.Outcome
	deadLettered map[string]bool // guarded by mu: ids dead-lettered
	changed      chan struct{}

	start, stormStart, stormEnd time.Time
	drained                     time.Time // the end of the wait for every OTP's end
	primaryRequests             []time.Time
	primary, backup             []providertest.Arrival
	acked                       map[string]bool // ids whose message Pub/Sub holds as acked
}

func newFailoverLog() *failoverLog {
	return &failoverLog{otp: map[string]time.Time{}, ended: map[string]nack.Outcome{}, deadLettered: map[string]bool{},
		acked: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (lg *failoverLog) published(id string, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.otp[id] = at
}

// Observe logs the end of a message: acked (sent, expired, a duplicate)
// or dead-lettered.
func (lg *failoverLog) Observe(ev dispatch.Event) {
	if ev.Action == nack.Nack || ev.ID == "" {
		return
	}
	lg.mu.Lock()
	if _, ok := lg.ended[ev.ID]; !ok || ev.Outcome != nack.Duplicate {
		lg.ended[ev.ID] = ev.Outcome
	}
	if ev.Action == nack.DeadLetter {
		lg.deadLettered[ev.ID] = true
	}
	lg.mu.Unlock()
	select {
	case lg.changed <- struct{}{}:
	default:
	}
}

// waitOTPEnds waits up to limit for every published OTP to reach an end
// and reports whether they did.
func (lg *failoverLog) waitOTPEnds(ctx context.Context, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		lg.mu.Lock()
		open := 0
		for id := range lg.otp {
			if _, ok := lg.ended[id]; !ok {
				open++
			}
		}
		lg.mu.Unlock()
		if open == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-lg.changed:
		}
	}
}
