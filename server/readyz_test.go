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

// fakeAccount is an account's limiter as /readyz asks it.
type fakeAccount struct {
	degraded, paused bool
}

var _ accountState = fakeAccount{}

func (a fakeAccount) AccountPause() (string, time.Duration, bool) {
	return "provider: status 401", 90 * time.Second, a.paused
}

func (a fakeAccount) Health() admission.Health {
	if a.degraded {
		return admission.Degraded
	}
	return admission.Healthy
}

// TestReadyzSaysWhyNotReady: /readyz's answer for each state it reads, in
// the order it asks: shutting down, the account paused, every account
// serving OTP degraded or paused, a pull silent, the lanes not receiving;
// the degraded accounts and Redis's state on every line. A degraded
// account leaves the pod ready while another serving OTP can send.
func TestReadyzSaysWhyNotReady(t *testing.T) {
	const sub = "projects/p/subscriptions/otp"
	stopped := make(chan struct{})
	close(stopped)
	now := time.Now()
	silentFor := func(d time.Duration) *pullwatch.Watch {
		return pullwatch.New(now.Add(-d), map[string]admission.Class{sub: admission.OTP}, nil)
	}
	// accounts: primary serves OTP and marketing, backup OTP, bulk
	// marketing.
	accounts := func(primary, backup, bulk fakeAccount) []readyAccount {
		return []readyAccount{{"primary", true, primary}, {"backup", true, backup}, {"bulk", false, bulk}}
	}
	healthy, degraded, paused := fakeAccount{}, fakeAccount{degraded: true}, fakeAccount{paused: true}
	ready := func(accts []readyAccount) readyz {
		return readyz{rdb: pinger{}, lanes: fakeLanes{ready: true}, accounts: accts, pulls: silentFor(0), subs: []string{sub}}
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
		{"every account healthy", ready(accounts(healthy, healthy, healthy)),
			http.StatusOK, "ready; redis reachable\n"},
		{"the OTP home degraded, its next account healthy", ready(accounts(degraded, healthy, healthy)),
			http.StatusOK, "ready; degraded: primary; redis reachable\n"},
		{"the OTP home paused, its next account healthy", ready(accounts(paused, healthy, healthy)),
			http.StatusOK, "ready; redis reachable\n"},
		{"an account without OTP degraded", ready(accounts(healthy, healthy, degraded)),
			http.StatusOK, "ready; degraded: bulk; redis reachable\n"},
		{"every OTP account degraded", ready(accounts(degraded, degraded, healthy)),
			http.StatusServiceUnavailable, "not ready: every account serving otp is degraded or paused; degraded: primary, backup; redis reachable\n"},
		{"one OTP account degraded, the other paused", ready(accounts(degraded, paused, healthy)),
			http.StatusServiceUnavailable, "not ready: every account serving otp is degraded or paused; degraded: primary; paused: backup; redis reachable\n"},
		{"degraded and a pull silent", readyz{rdb: pinger{}, lanes: fakeLanes{ready: true}, accounts: accounts(degraded, healthy, healthy), pulls: silentFor(time.Hour), subs: []string{sub}},
			http.StatusServiceUnavailable, "not ready: no answer from Pub/Sub on " + sub + " for 1h0m0s; degraded: primary; redis reachable\n"},
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
