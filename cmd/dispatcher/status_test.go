package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/server"
	"smsdispatcher/status"
)

// TestStatusShowsAStateBuiltByThePipeline runs two dispatchers on one
// account, sends, cuts one off from Redis, sets an override and a 429's
// penalty, and checks what `status --json` says of it: the sends by class,
// the penalty, the override in force, both processes (one alive, one
// silent), and that it reads only. Then the text form, --watch without a
// terminal, and a Redis that cannot be reached.
func TestStatusShowsAStateBuiltByThePipeline(t *testing.T) {
	// Closed by cleanups registered before the instances' stop, so that
	// they run after it: a Pub/Sub server gone while a pull stream
	// reopens can hold Receive, and the instances' run, for good.
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	sim := providertest.NewGeneric(providertest.Config{})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	account := redistest.UniqueAccount(t)
	redisAddr := redistest.Addr(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("REDIS_URL", "redis://"+redisAddr)
	t.Setenv("SMS_ACCOUNT", account)
	t.Setenv("SMS_PROVIDER_URL", simSrv.URL)
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	cfg, err := loadConfig(map[string]string{"PUBSUB_PROJECT_ID": "proj", "SMS_ACCOUNT": account, "SMS_PROVIDER_URL": simSrv.URL, "REDIS_URL": "redis://" + redisAddr})
	if err != nil {
		t.Fatal(err)
	}

	// Two processes: the second reaches Redis through a proxy the test cuts.
	proxy := redistest.NewProxy(t, redisAddr)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	var ids []string
	for i, addr := range []string{redisAddr, proxy.Addr()} {
		rdb, err := redisconn.New(redisconn.Settings{URL: "redis://" + addr, CallTimeout: cfg.RedisTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		ps, err := topology.NewClient(ctx, "proj", ps.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
		sender, secret, err := cfg.Account.Sender(cfg.SendTimeout)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("pod-", i)
		srv, err := server.New(cfg, []server.Account{{Setup: cfg.Account, Sender: sender, Credentials: secret}}, rdb, ps,
			server.Options{ID: id, Version: version, Emulator: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		go func() { srv.Run(runCtx); srv.Close(); done <- struct{}{} }()
	}
	t.Cleanup(func() { stop(); <-done; <-done })
	for i := range 4 {
		for _, class := range []string{"otp", "marketing"} {
			if err := run(ctx, []string{"publish", "--class", class, "--to", "+819012345678", "--body", "hello", "--id", fmt.Sprint(class, i)}, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, func() bool { return sim.Stats().Accepted == 8 })
	proxy.SetMode(redistest.Refuse)
	if err := run(ctx, []string{"override", "--set-target-rps", "50", "--ttl", "1h"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	lim, err := newLimiterFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.ReportThrottled(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Until the cut process falls silent (status.AliveWithin after its last
	// beat): by then the sends' seconds are long whole.
	var out bytes.Buffer
	var r status.Report
	waitWithin(t, 30*time.Second, "the cut process silent", func() bool {
		out.Reset()
		if err := run(ctx, []string{"status", "--json"}, &out, io.Discard); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		r = status.Report{}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%v in %s", err, out.String())
		}
		for _, a := range r.Accounts {
			for _, p := range a.Processes {
				if p.ID == ids[1] && !p.Alive {
					return true
				}
			}
		}
		return false
	})
	if len(r.Accounts) != 1 {
		t.Fatalf("accounts %+v", r.Accounts)
	}
	a := r.Accounts[0]
	switch {
	case a.Name != account || a.TargetRPS != 90 || a.InForceRPS != 50:
		t.Errorf("rates: %+v, want target 90 and 50 in force", a)
	case a.Override == nil || a.Override.TargetRPS != 50 || a.Override.LeftSeconds == nil || *a.Override.LeftSeconds < 3000:
		t.Errorf("override %+v, want target 50 for about an hour", a.Override)
	case a.Penalty == nil || a.Penalty.Reason != "429" || a.Penalty.LeftSeconds < 50:
		t.Errorf("penalty %+v, want a 429's of about a minute", a.Penalty)
	case a.Sent["otp"].Last60s != 4 || a.Sent["marketing"].Last60s != 4 || len(a.Sent["otp"].PerSecond) != 60:
		t.Errorf("sent %+v %+v, want 4 of each class in the last 60 s", a.Sent["otp"], a.Sent["marketing"])
	case a.InFlight != 0 || a.Learned != nil:
		t.Errorf("in flight %d, learned %+v; want none", a.InFlight, a.Learned)
	}
	procs := map[string]status.Process{}
	for _, p := range a.Processes {
		procs[p.ID] = p
	}
	if p := procs[ids[0]]; !p.Alive || p.Mode == "silent" || p.Version != version {
		t.Errorf("process %s: %+v, want alive", ids[0], p)
	}
	if p := procs[ids[1]]; p.Alive || p.Mode != "silent" || p.LastBeat < status.AliveWithin.Seconds() {
		t.Errorf("process %s (cut off from Redis): %+v, want silent", ids[1], p)
	}

	out.Reset()
	if err := run(ctx, []string{"status"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatcher status:\n%s", out.String())
	for _, want := range []string{"account " + account, "429, ", "target 50/s", "1 alive", "1 silent", "4 in 60 s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status text has no %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	if err := run(wctx, []string{"status", "--watch"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatcher status --watch | cat:\n%s", out.String())
	if lines := strings.Count(out.String(), "account="+account); lines < 2 || strings.Contains(out.String(), "\x1b[") {
		t.Errorf("--watch to a pipe: %d lines, want one a second and no terminal codes:\n%s", lines, out.String())
	}

	t.Setenv("REDIS_URL", "redis://"+freeAddr(t))
	err = run(ctx, []string{"status"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "redis unreachable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("status without Redis: %v, want one line saying so", err)
	}
}

// newLimiterFor is the limiter of cfg's one account, on a client of its own.
func newLimiterFor(cfg config.Settings) (*admission.Limiter, error) {
	rdb, err := redisconn.New(redisconn.Settings{URL: cfg.RedisURL, CallTimeout: time.Second})
	if err != nil {
		return nil, err
	}
	lc := cfg.Limiter(cfg.Account)
	lc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return admission.New(rdb, lc)
}
