package loadharness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// classesLog is what a classes run records besides the simulator: when
// each OTP and transactional message was published, when the backlog was,
// and the run's span. Safe for concurrent use; the times are written
// before the feeds start or after they stop.
type classesLog struct {
	mu        sync.Mutex
	published map[string]time.Time // guarded by mu: id -> its publish time
	nacks     map[string]int       // guarded by mu: "class outcome/reason" -> nacks
	otpSteps  map[string]otpSteps  // guarded by mu: an OTP's id -> its first handling's

	backlogAt  time.Time // the backlog's publishing began
	start, end time.Time // the feeds'
	drained    time.Time // the end of the wait for the streams' sends
}

func newClassesLog() *classesLog {
	return &classesLog{published: map[string]time.Time{}, nacks: map[string]int{}, otpSteps: map[string]otpSteps{}}
}

// otpSteps are the times of an OTP's first handling: when it reached a
// dispatcher, and when it got its slot (zero: none).
type otpSteps struct{ received, admitted time.Time }

// Observe counts the nacks by class, outcome and the admission's reason,
// and keeps each OTP's first handling's times (the dispatchers' Observer).
func (lg *classesLog) Observe(ev dispatch.Event) {
	if ev.Class == admission.OTP && ev.ID != "" {
		lg.mu.Lock()
		if _, ok := lg.otpSteps[ev.ID]; !ok {
			lg.otpSteps[ev.ID] = otpSteps{received: ev.Received, admitted: ev.Admitted}
		}
		lg.mu.Unlock()
	}
	if ev.Action != nack.Nack {
		return
	}
	key := fmt.Sprintf("%s %s", ev.Class, ev.Outcome)
	if ev.Decision.Reason != "" {
		key += "/" + string(ev.Decision.Reason)
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.nacks[key]++
}

func (lg *classesLog) add(id string, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.published[id] = at
}

// feedClass publishes messages with ids prefix0, prefix1, ... at rate
// until ctx ends, logging each one's publish time, each with a deadline
// life after it (0: none), and returns the first publish error.
func feedClass(ctx context.Context, pub *pubsub.Publisher, rate float64, prefix, body string, life time.Duration, lg *classesLog) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var results []*pubsub.PublishResult
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			for _, r := range results {
				if _, err := r.Get(context.WithoutCancel(ctx)); err != nil {
					return err
				}
			}
			return nil
		case <-tick.C:
		}
		id := fmt.Sprintf("%s%d", prefix, n)
		now := time.Now()
		var deadline time.Time
		if life > 0 {
			deadline = now.Add(life)
		}
		lg.add(id, now)
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: failoverMessage(id, body, deadline)}))
	}
}

// waitStreamsSent waits up to limit for the simulator to have accepted
// every OTP and transactional message published, and reports whether it
// has.
func (lg *classesLog) waitStreamsSent(ctx context.Context, sim *providertest.Simulator, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		sent := map[string]bool{}
		for _, a := range sim.Arrivals() {
			if a.Outcome == "accepted" && !strings.HasPrefix(a.ID, marketingIDPrefix) {
				sent[a.ID] = true
			}
		}
		lg.mu.Lock()
		unsent := 0
		for id := range lg.published {
			if !sent[id] {
				unsent++
			}
		}
		lg.mu.Unlock()
		if unsent == 0 || !time.Now().Before(deadline) {
			return unsent == 0
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
