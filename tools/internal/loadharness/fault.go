package loadharness

import (
	"context"
	"net/http"
	"slices"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// faultEvent is one change of state in a run's fault schedule.
type faultEvent struct {
	at    time.Duration // from the run's start
	apply func()
}

// schedule turns faults into events in time order. A redis-down fault needs
// px; the provider faults act through sim.FailFor, so two provider faults
// that overlap cut each other short.
func schedule(faults []fault, sim *providertest.Simulator, px *redistest.Proxy) []faultEvent {
	var evs []faultEvent
	for _, f := range faults {
		switch f.kind {
		case faultRedisDown:
			evs = append(evs,
				faultEvent{f.at, func() { px.SetMode(redistest.Refuse) }},
				faultEvent{f.at + f.dur, func() { px.SetMode(redistest.Up) }})
		case fault429:
			evs = append(evs, faultEvent{f.at, func() { sim.FailFor(http.StatusTooManyRequests, f.dur) }})
		case fault5xx:
			evs = append(evs, faultEvent{f.at, func() { sim.FailFor(http.StatusServiceUnavailable, f.dur) }})
		}
	}
	slices.SortStableFunc(evs, func(a, b faultEvent) int { return int(a.at - b.at) })
	return evs
}

// injectFaults applies evs at their times from start until ctx ends.
func injectFaults(ctx context.Context, start time.Time, evs []faultEvent) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, ev := range evs {
		timer.Reset(time.Until(start.Add(ev.at)))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			ev.apply()
		}
	}
}
