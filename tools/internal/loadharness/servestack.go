package loadharness

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/server"
	"smsdispatcher/status"
)

// A serveStack is the dispatcher as serve wires it (config from
// ACCOUNTS_FILE, server.New and Run), in several instances, each with its
// own Redis and Pub/Sub clients as pods have, on pstest, a real Redis and
// one or two simulators (the primary, the stack's, and a backup of its
// own). The suppressions and pumping scenarios run on it: the suppression
// list and the pumping guard are wired by the server, not by the harness.
//
// Invariant: close stops every instance and closes every client, server
// and the stack, whatever start did before it failed.
type serveStack struct {
	stack   *localstack.Stack
	backup  *providertest.Simulator // nil: no backup account
	cfg     config.Settings
	admin   *pubsub.Client        // the harness's own Pub/Sub client: publishes the traffic
	stats   redis.UniversalClient // the harness's own Redis client: Redis's statistics, the product's keys
	calls   []*opCounter          // each instance's script calls by operation
	before  map[string]int64      // their sum at resetCost
	stopRun context.CancelFunc
	running sync.WaitGroup
	stopped bool
	closers []func() // run last first, once the instances stopped
}

// stackSpec is what a serveStack runs.
type stackSpec struct {
	instances int
	redisURL  string
	// accountsFile is the ACCOUNTS_FILE of the primary's and the
	// backup's simulator URLs (backup "" without one).
	accountsFile func(primary, backup string) string
	backup       bool
	observer     dispatch.Observer
	logger       *slog.Logger
	redisTimeout time.Duration
}

// stackSim is the simulators' settings: 100 in any sliding second, as the
// demo's contract, never suspending.
var stackSim = providertest.Config{Token: simToken, Limit: contractRPS, Window: time.Second, RetryAfter: time.Second, SuspendAfter: -1}

// startServeStack starts s's stack and topology, and its instances, which
// run until stop.
func startServeStack(ctx context.Context, s stackSpec) (st *serveStack, err error) {
	st = &serveStack{}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	st.stack, err = localstack.Start(localstack.Options{
		Project: failoverProject, RedisURL: s.redisURL, Sim: stackSim,
		NackDelays: map[string]time.Duration{
			failoverTopology.OTPSubscription:       topology.MinimumBackoff("otp"),
			failoverTopology.MarketingSubscription: topology.MinimumBackoff("marketing"),
		},
	})
	if err != nil {
		return st, err
	}
	st.closers = append(st.closers, st.stack.Close)
	backupURL := ""
	if s.backup {
		st.backup = providertest.NewGeneric(stackSim)
		srv := httptest.NewServer(st.backup)
		st.closers = append(st.closers, srv.Close)
		backupURL = srv.URL
	}
	dir, err := os.MkdirTemp("", "loadtest-stack-")
	if err != nil {
		return st, err
	}
	st.closers = append(st.closers, func() { os.RemoveAll(dir) })
	if st.cfg, err = stackSettings(s.redisURL, filepath.Join(dir, "accounts.yaml"), s.accountsFile(st.stack.SimURL, backupURL)); err != nil {
		return st, err
	}
	if st.admin, err = topology.NewClient(ctx, st.cfg.ProjectID, st.stack.Pubsub.Addr); err != nil {
		return st, err
	}
	st.closers = append(st.closers, func() { st.admin.Close() })
	t := st.cfg.Topology()
	t.WithoutDeadLetterPolicy = true // pstest
	if err := topology.Setup(ctx, st.admin, t, func(string, string, string) {}); err != nil {
		return st, fmt.Errorf("pubsub setup: %w", err)
	}
	if st.stats, err = redisconn.New(redisconn.Settings{URL: s.redisURL, CallTimeout: receiptsReadTimeout}); err != nil {
		return st, err
	}
	st.closers = append(st.closers, func() { st.stats.Close() })
	return st, nil
}

// stackSettings are the dispatcher's settings on the Redis at redisURL,
// as serve reads them, ACCOUNTS_FILE file written with text (the
// settings read it again: it stays until the stack closes).
func stackSettings(redisURL, file, text string) (config.Settings, error) {
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return config.Settings{}, err
	}
	env := map[string]string{"PUBSUB_PROJECT_ID": failoverProject, "REDIS_URL": redisURL, "ACCOUNTS_FILE": file}
	fs := flag.NewFlagSet("stack", flag.ContinueOnError)
	load := config.Flags(fs, config.All, func(k string) string { return env[k] })
	if err := fs.Parse(nil); err != nil {
		return config.Settings{}, err
	}
	cfg, err := load()
	if err != nil {
		return config.Settings{}, err
	}
	routing, err := cfg.Routing()
	if err != nil {
		return config.Settings{}, err
	}
	cfg.Lanes = routing.Classes
	return cfg, nil
}

// run starts s.instances servers, as serve builds them, each on clients
// of its own; they run until stop. Each loads the suppression list before
// its lanes pull, as serve does: run returns once every one has started.
func (st *serveStack) run(ctx context.Context, s stackSpec) error {
	routing, err := st.cfg.Routing()
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	st.stopRun = stop
	for i := range s.instances {
		rdb, ps, closers, err := instanceClients(ctx, s.redisURL, st.stack, s.redisTimeout, false)
		st.closers = append(st.closers, closers...)
		if err != nil {
			return err
		}
		calls := &opCounter{}
		rdb.AddHook(calls)
		st.calls = append(st.calls, calls)
		var accts []server.Account
		for _, a := range routing.Accounts {
			sender, secret, err := a.Sender(st.cfg.SendTimeout)
			if err != nil {
				return err
			}
			st.closers = append(st.closers, sender.CloseIdleConnections)
			accts = append(accts, server.Account{Setup: a, Sender: sender, Credentials: secret})
		}
		srv, err := server.New(st.cfg, accts, rdb, ps, server.Options{
			Version: "loadtest", Emulator: true, Observer: s.observer, Logger: s.logger.With("instance", i), Route: routing.Route,
		})
		if err != nil {
			return err
		}
		st.closers = append(st.closers, srv.Close)
		st.running.Go(func() {
			if err := srv.Run(runCtx); err != nil && runCtx.Err() == nil {
				s.logger.Error("instance stopped", "instance", i, "err", err)
			}
		})
	}
	return nil
}

// started waits, up to limit, for every instance's first heartbeat: a
// server beats once it has loaded the suppression list, as its lanes
// start pulling.
func (st *serveStack) started(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		beating := 0
		for _, c := range st.calls {
			if c.snapshot()[status.OpHeartbeat] > 0 {
				beating++
			}
		}
		switch {
		case beating == len(st.calls):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d instances started within %v", beating, len(st.calls), limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the instances' runs and waits for them; once only.
func (st *serveStack) stop() {
	if st.stopped || st.stopRun == nil {
		return
	}
	st.stopped = true
	st.stopRun()
	st.running.Wait()
}

// close stops the instances and closes what the stack opened.
func (st *serveStack) close() {
	st.stop()
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
}

// arrivals are every simulator's arrivals, the primary's first.
func (st *serveStack) arrivals() []providertest.Arrival {
	out := st.stack.Sim.Arrivals()
	if st.backup != nil {
		out = append(out, st.backup.Arrivals()...)
	}
	return out
}

// scriptCalls sums the instances' script calls by operation.
func (st *serveStack) scriptCalls() map[string]int64 {
	sum := map[string]int64{}
	for _, c := range st.calls {
		for op, n := range c.snapshot() {
			sum[op] += n
		}
	}
	return sum
}

// resetCost starts the row's cost here: Redis's statistics (CONFIG
// RESETSTAT, whose error it returns) and the instances' calls.
func (st *serveStack) resetCost(ctx context.Context) error {
	st.before = st.scriptCalls()
	return redisstats.Reset(ctx, st.stats)
}

// redisCost is Redis's own count of a row (INFO commandstats since the
// row's CONFIG RESETSTAT) and the instances' calls by operation since.
type redisCost struct {
	scripts, executed int64
	ops               map[string]int64
	err               string // why Redis's figures are missing; "" when read
}

// readCost reads the row's cost since resetCost once the instances
// stopped; statsErr is the reset's.
func (st *serveStack) readCost(ctx context.Context, statsErr error) redisCost {
	c := redisCost{ops: st.scriptCalls()}
	for op, n := range st.before {
		if c.ops[op] -= n; c.ops[op] == 0 {
			delete(c.ops, op)
		}
	}
	var cs redisstats.CommandStats
	if statsErr == nil {
		cs, statsErr = redisstats.Read(ctx, st.stats)
	}
	if statsErr != nil {
		c.err = statsErr.Error()
		return c
	}
	c.scripts, c.executed = cs.Scripts(), cs.Executed()
	return c
}

// An endLog keeps each message's end, by id (the instances' Observer):
// its first end that acked or dead-lettered it; nacks are only counted.
// Safe for concurrent use.
type endLog struct {
	mu    sync.Mutex
	ends  map[string]dispatch.Event // guarded by mu
	nacks map[string]int            // guarded by mu: "outcome/reason" -> nacks
	// onEnd, if set, is told of each end once (it must not block).
	onEnd func(dispatch.Event)
}

func newEndLog() *endLog { return &endLog{ends: map[string]dispatch.Event{}, nacks: map[string]int{}} }

// Observe keeps ev if it is its id's first end (dispatch.Observer).
func (l *endLog) Observe(ev dispatch.Event) {
	l.mu.Lock()
	if ev.Action == nack.Nack {
		key := ev.Outcome.String()
		if ev.Decision.Reason != "" {
			key += "/" + string(ev.Decision.Reason)
		}
		l.nacks[key]++
		l.mu.Unlock()
		return
	}
	_, seen := l.ends[ev.ID]
	if !seen {
		l.ends[ev.ID] = ev
	}
	l.mu.Unlock()
	if !seen && l.onEnd != nil {
		l.onEnd(ev)
	}
}

// ended reports how many of ids have ended.
func (l *endLog) ended(ids []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := l.ends[id]; ok {
			n++
		}
	}
	return n
}

// snapshot copies the ends and the nacks by outcome and reason.
func (l *endLog) snapshot() (map[string]dispatch.Event, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.ends), maps.Clone(l.nacks)
}

// waitEnded waits up to limit for every one of ids to end, and reports
// how many have not.
func (l *endLog) waitEnded(ctx context.Context, ids []string, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		left := len(ids) - l.ended(ids)
		if left == 0 || ctx.Err() != nil || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishJSON publishes m's JSON on pub; the result is the server's
// answer.
func publishJSON(ctx context.Context, pub *pubsub.Publisher, m map[string]string) *pubsub.PublishResult {
	b, _ := json.Marshal(m) // strings only: it cannot fail
	return pub.Publish(ctx, &pubsub.Message{Data: b})
}
