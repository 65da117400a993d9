package loadharness

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// arrivalJitter is a delaying proxy in front of the provider simulator
// (--arrival-jitter): it holds each request a uniform random time in [0,
// max] before handing it on, so that the provider sees admissions arrive
// spread, as scheduling and a network spread them
// (PROVIDER_ARRIVAL_JITTER). It sits in the simulator's own HTTP server,
// so the hop adds nothing but the hold. Safe for concurrent use.
type arrivalJitter struct {
	next http.Handler
	max  time.Duration
}

func (j arrivalJitter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hold := time.NewTimer(time.Duration(rand.Int64N(int64(j.max) + 1)))
	defer hold.Stop()
	select {
	case <-hold.C:
		j.next.ServeHTTP(w, r)
	case <-r.Context().Done():
		// The sender gave up (its send timeout): the request never
		// reaches the provider, as one lost on the way.
	}
}
