package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/pullwatch"
)

// Limits of the HTTP server. Its answers are small and come from memory
// (a Redis PING of at most a second for /readyz), so a client that takes
// longer than these to send a request, read an answer or use its
// keep-alive connection again is a stuck or hostile one, and its
// connection is closed rather than held for ever.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second // the whole request, headers and body
	httpWriteTimeout      = 15 * time.Second // from the request's headers to the answer's end: a /metrics scrape
	httpIdleTimeout       = 60 * time.Second // a keep-alive connection between requests; Prometheus scrapes every 15s
	httpMaxHeaderBytes    = 16 << 10         // a probe's or a scrape's headers take a few hundred bytes
)

// NewHTTPServer returns the server of /healthz, /readyz and /metrics, and
// of the console (`dispatcher console`), with the limits above.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// handler serves /healthz, /readyz and /metrics; /readyz fails once
// stopping is closed (SIGTERM).
func (s *Server) handler(stopping <-chan struct{}, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	first := failingOver(s.cfg.Process)
	var accounts []readyAccount
	for n, a := range s.accounts {
		accounts = append(accounts, readyAccount{name: a.Setup.Name, otp: slices.Contains(a.Setup.Classes, first), lim: s.limiters[n]})
	}
	mux.Handle("GET /readyz", readyz{rdb: s.rdb, lanes: s.d, first: first, accounts: accounts, pulls: s.opts.Pulls, subs: s.opts.Subscriptions, stopping: stopping})
	mux.Handle("GET /metrics", metrics)
	return mux
}

// failingOver is the class whose policy fails over (the first class):
// /readyz wants an account serving it that sends.
func failingOver(p config.Process) admission.Class {
	classes := p.ClassList()
	return classes[max(slices.IndexFunc(classes, func(c config.Class) bool { return p.Policy(c.Name).FailsOver }), 0)].Name
}

// lanes is what /readyz asks of the dispatcher (*dispatch.Dispatcher).
type lanes interface {
	AccountPause() (why string, left time.Duration, paused bool)
	Ready() bool
}

// accountState is what /readyz asks of an account's limiter
// (*admission.Limiter).
type accountState interface {
	AccountPause() (why string, left time.Duration, paused bool)
	Health() admission.Health
}

// readyAccount is one account as /readyz sees it.
type readyAccount struct {
	name string
	otp  bool // it serves the class that fails over (failingOver)
	lim  accountState
}

// readyz answers /readyz: ready, or why not, with the accounts that are
// degraded and Redis's state.
type readyz struct {
	rdb      Redis
	lanes    lanes
	first    admission.Class // the class that fails over; "": otp
	accounts []readyAccount
	pulls    *pullwatch.Watch // watches subs
	subs     []string
	stopping <-chan struct{} // closed at SIGTERM
}

// health returns the names of the degraded accounts and of the paused
// ones, and whether some account serving the first class is neither: a
// degraded account sends probes only, and OTP goes on to the next
// account, so the pod is ready as long as one is left.
func (z readyz) health() (degraded, paused []string, otpSends bool) {
	otpAccounts := 0
	for _, a := range z.accounts {
		d := a.lim.Health() == admission.Degraded
		_, _, p := a.lim.AccountPause()
		if d {
			degraded = append(degraded, a.name)
		} else if p {
			paused = append(paused, a.name)
		}
		if a.otp {
			otpAccounts++
			otpSends = otpSends || (!d && !p)
		}
	}
	return degraded, paused, otpSends || otpAccounts == 0
}

func (z readyz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Redis down is not "not ready": the limiter falls back. Only lanes
	// that are not receiving make the pod unready.
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	redisState := "reachable"
	if err := z.rdb.Ping(ctx).Err(); err != nil {
		redisState = "unreachable (limiter in fallback)"
	}
	// Every line ends with the degraded accounts (whatever else is
	// wrong, their sends are failing) and Redis's state.
	degraded, paused, otpSends := z.health()
	tail := "redis " + redisState
	if len(paused) > 0 && !otpSends {
		tail = "paused: " + strings.Join(paused, ", ") + "; " + tail
	}
	if len(degraded) > 0 {
		tail = "degraded: " + strings.Join(degraded, ", ") + "; " + tail
	}
	select {
	case <-z.stopping:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: shutting down (pulls stopping, sends in flight finishing); %s\n", tail)
		return
	default:
	}
	if why, left, paused := z.lanes.AccountPause(); paused {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: the provider refused the account (%s); sending paused for %v; %s\n",
			why, left.Round(time.Second), tail)
		return
	}
	if !otpSends {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: every account serving %s is degraded or paused; %s\n", cmp.Or(z.first, admission.OTP), tail)
		return
	}
	for _, name := range z.subs {
		if d, silent := z.pulls.Silent(name, time.Now()); silent {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: no answer from Pub/Sub on %s for %v; %s\n", name, d.Round(time.Second), tail)
			return
		}
	}
	if !z.lanes.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: subscriptions not receiving; %s\n", tail)
		return
	}
	fmt.Fprintf(w, "ready; %s\n", tail)
}
