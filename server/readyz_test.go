package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/pullwatch"
)

// pinger is a Redis that answers Ping with err; it runs no script.
type pinger struct {
	redis.Scripter
	err error
}

func (p pinger) Ping(ctx context.Context) *redis.StatusCmd {
	return redis.NewStatusResult("PONG", p.err)
}

// fakeLanes answers what /readyz asks of the dispatcher.
type fakeLanes struct {
	ready  bool
	paused bool
}

var _ lanes = fakeLanes{}

func (l fakeLanes) AccountPause() (string, time.Duration, bool) {
	return "provider: status 401", 90 * time.Second, l.paused
}

func (l fakeLanes) Ready() bool { return l.ready }

// TestReadyzSaysWhyNotReady: /readyz's answer for each state it reads, in
// the order it asks: shutting down, the account paused, a pull silent,
// the lanes not receiving; Redis's state on every line.
func TestReadyzSaysWhyNotReady(t *testing.T) {
	const sub = "projects/p/subscriptions/otp"
	stopped := make(chan struct{})
	close(stopped)
	now := time.Now()
	silentFor := func(d time.Duration) *pullwatch.Watch {
		return pullwatch.New(now.Add(-d), map[string]admission.Class{sub: admission.OTP}, nil)
	}
	for _, tt := range []struct {
		name     string
		z        readyz
		wantCode int
		want     string
	}{
		{"ready", readyz{rdb: pinger{}, lanes: fakeLanes{ready: true}, pulls: silentFor(0), subs: []string{sub}},
			http.StatusOK, "ready; redis reachable\n"},
		{"ready without Redis", readyz{rdb: pinger{err: errors.New("down")}, lanes: fakeLanes{ready: true}},
			http.StatusOK, "ready; redis unreachable (limiter in fallback)\n"},
		{"shutting down", readyz{rdb: pinger{}, lanes: fakeLanes{ready: true, paused: true}, stopping: stopped},
			http.StatusServiceUnavailable, "not ready: shutting down (pulls stopping, sends in flight finishing); redis reachable\n"},
		{"account paused", readyz{rdb: pinger{}, lanes: fakeLanes{ready: true, paused: true}, pulls: silentFor(time.Hour), subs: []string{sub}},
			http.StatusServiceUnavailable, "not ready: the provider refused the account (provider: status 401); sending paused for 1m30s; redis reachable\n"},
		{"a pull silent", readyz{rdb: pinger{}, lanes: fakeLanes{ready: true}, pulls: silentFor(time.Hour), subs: []string{sub}},
			http.StatusServiceUnavailable, "not ready: no answer from Pub/Sub on " + sub + " for 1h0m0s; redis reachable\n"},
		{"not receiving", readyz{rdb: pinger{}, lanes: fakeLanes{}, pulls: silentFor(0), subs: []string{sub}},
			http.StatusServiceUnavailable, "not ready: subscriptions not receiving; redis reachable\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tt.z.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
			if w.Code != tt.wantCode || w.Body.String() != tt.want {
				t.Errorf("%d %q, want %d %q", w.Code, w.Body.String(), tt.wantCode, tt.want)
			}
		})
	}
}
