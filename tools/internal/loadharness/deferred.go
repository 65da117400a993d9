package loadharness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/redis/go-redis/v9"

	classpolicy "smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
)

// The deferred scenario: a campaign deferred overnight and released when
// its window opens, at scale. --messages messages (a million by default)
// are stored through the product's deferral store as a dispatcher stores
// them before it acks their delivery (Store.Judge, a send window closed
// until an opening an hour on, the dispatcher's data and attributes),
// deferredStorers calls at once over deferredProcesses clients; Redis's
// used_memory is read before and after. Then the window opens (the
// releasers' clocks are set to it) and deferredProcesses releasers, each
// with its own Redis and Pub/Sub clients, release them to the class's
// topic on pstest, whose Publish a reactor counts by id (deferredTally)
// before pstest keeps each message. A row ends once every id was
// published and the store is empty. Rows: --release-spread (0s, and
// the default release_spread) × --code: after (deferral.Releaser: a page
// removed in one call) and before (the release as it was, a remove call
// per message: releaseOneByOne), before at 0s only: the spread does not
// change a remove's cost. Redis's commands during the release (INFO
// commandstats, reset at the opening) are the releasers', and the
// harness's reads of the store's size once every id was published (three
// commands a poll).
const (
	scenDeferred = "deferred"

	deferredMessages  = 1_000_000
	deferredProcesses = 3  // releasers, and the storers' clients
	deferredStorers   = 24 // Judge calls at once
	deferredPage      = 500
	// deferredOpening is how long after the stores begin the window
	// opens: every message is deferred to it.
	deferredOpening = time.Hour
	// deferredPoll is how often the harness looks whether the release is
	// done.
	deferredPoll = 250 * time.Millisecond
	// deferredSlack bounds a release beyond its spread; a row that takes
	// longer fails.
	deferredSlack = 30 * time.Minute
	deferredTopic = "sms-deferred"
)

// deferredDefaultSpreads are --release-spread unless given.
var deferredDefaultSpreads = "0s," + classpolicy.DefaultReleaseSpread.String()

// deferredFlags are the flags only --scenario deferred takes.
var deferredFlags = []string{"messages", "release-spread"}

// addDeferredFlags defines the deferred scenario's flags on fs.
func addDeferredFlags(fs *flag.FlagSet, c *Config) {
	fs.IntVar(&c.deferredMessages, "messages", deferredMessages, "with --scenario deferred, the messages deferred and released in each row")
	fs.StringVar(&c.deferredSpreadList, "release-spread", deferredDefaultSpreads, "with --scenario deferred, the class's release_spread of each row (comma list)")
}

// deferredUsage is the deferred scenario's part of --scenario's usage.
func deferredUsage() string {
	return fmt.Sprintf(", %s (--messages (%d) deferred through the deferral store to a window's opening, then released by %d releasers to pstest; rows --release-spread (%s) × --code: after (a page removed per call), before (a remove call per message; at 0s only): Redis memory per message, the release's time and Redis commands per message; fails when a message is lost, published twice or left stored)",
		scenDeferred, deferredMessages, deferredProcesses, deferredDefaultSpreads)
}

// deferredSpec is one deferred row's settings.
type deferredSpec struct {
	code     string
	spread   time.Duration
	messages int
}

// checkDeferred checks the deferred scenario's settings of c (set: the
// flags given) and resolves its rows.
func checkDeferred(c *Config, set map[string]bool) error {
	if !c.deferredRun {
		for _, name := range deferredFlags {
			if set[name] {
				return fmt.Errorf("--%s applies to --scenario %s", name, scenDeferred)
			}
		}
		return nil
	}
	if c.deferredMessages < 1 || c.deferredMessages > 10_000_000 {
		return fmt.Errorf("--messages must be 1 to 10,000,000, got %d", c.deferredMessages)
	}
	c.deferredSpecs = nil
	for v := range strings.SplitSeq(c.deferredSpreadList, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 || d > 24*time.Hour {
			return fmt.Errorf("--release-spread: want durations of 0s to 24h, got %q", v)
		}
		for _, code := range c.codes {
			if code == codeBefore && d > 0 {
				continue // a remove's cost does not depend on the spread
			}
			c.deferredSpecs = append(c.deferredSpecs, deferredSpec{code: code, spread: d, messages: c.deferredMessages})
		}
	}
	if len(c.deferredSpecs) == 0 {
		return fmt.Errorf("--scenario %s: no row: --code before runs at --release-spread 0s only", scenDeferred)
	}
	return nil
}

// runDeferredRows runs every deferred row of cfg, one after the other.
func runDeferredRows(ctx context.Context, cfg *Config, redisOpts *redis.Options, progress io.Writer) ([]*deferredRow, error) {
	var rows []*deferredRow
	for i, s := range cfg.deferredSpecs {
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario deferred, code %s, release_spread %v, %d messages\n", i+1, len(cfg.deferredSpecs), s.code, s.spread, s.messages)
		r, err := runDeferred(ctx, cfg, redisOpts, s, progress)
		if err != nil {
			return nil, fmt.Errorf("run scenario deferred %s %v: %w", s.code, s.spread, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// openingWindow is a send window closed until one instant.
type openingWindow time.Time

func (o openingWindow) Next(_, _ string, t time.Time) time.Time {
	if t.Before(time.Time(o)) {
		return time.Time(o)
	}
	return t
}

// runDeferred runs one row: it stores s.messages, releases them and
// measures. Everything it starts is stopped before it returns.
func runDeferred(ctx context.Context, cfg *Config, redisOpts *redis.Options, s deferredSpec, progress io.Writer) (*deferredRow, error) {
	ns, logger := newRun(cfg)
	class := "deferred-" + ns
	tally := newDeferredTally(ns+"-", topicName(deferredTopic), s.messages)
	r := &deferredRow{Spec: s}

	admin := redis.NewClient(redisOpts)
	defer admin.Close()
	var err error
	if r.MemBefore, err = usedMemory(ctx, admin); err != nil {
		return nil, err
	}
	open := time.Now().Add(deferredOpening)
	began := time.Now()
	if r.DataBytes, err = storeDeferred(ctx, redisOpts, class, tally, open, s, progress); err != nil {
		return nil, err
	}
	r.StoreTime = time.Since(began)
	if r.MemStored, err = usedMemory(ctx, admin); err != nil {
		return nil, err
	}

	srv := pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: tally})
	defer srv.Close()
	ps, err := topology.NewClient(ctx, failoverProject, srv.Addr)
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: tally.topic}); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}

	statsErr := redisstats.Reset(ctx, admin)
	start := time.Now()
	tally.begin(start)
	shift := open.Sub(start) // the releasers' clocks read the opening now
	released := make([]atomic.Int64, deferredProcesses)
	warnings := &warnCount{}
	logger = slog.New(warnings.wrap(logger.Handler()))
	stop, err := startReleasers(ctx, redisOpts, srv.Addr, class, s.code, shift, released, logger)
	if err != nil {
		return nil, err
	}
	k := keys.DeferredOf(class)
	done := waitReleased(ctx, admin, k, tally, s.spread+deferredSlack)
	stop()
	r.Empty = time.Since(start)
	r.TimedOut = !done

	r.Tally = tally.sum()
	r.Warnings, r.FirstWarning = warnings.read()
	for i := range released {
		r.ByReleaser = append(r.ByReleaser, released[i].Load())
	}
	cs, err := redisstats.Read(ctx, admin)
	us, usErr := redisstats.ScriptMicros(ctx, admin)
	if statsErr == nil && err == nil && usErr == nil {
		r.Scripts, r.Commands, r.ScriptMicros = cs.Scripts(), cs.Executed(), us
	}
	if r.MemAfter, err = usedMemory(ctx, admin); err != nil {
		return nil, err
	}
	r.Left = storeSize(ctx, admin, k)
	r.Load = loadAverage()
	r.Failures = deferredJudge(r)
	return r, nil
}

// storeDeferred defers s.messages of class until open through
// deferral.Store.Judge, deferredStorers at once over deferredProcesses
// clients, and returns the data's mean size in bytes.
func storeDeferred(ctx context.Context, redisOpts *redis.Options, class string, tally *deferredTally, open time.Time, s deferredSpec, progress io.Writer) (float64, error) {
	rules := classpolicy.Sending{Window: openingWindow(open), ReleaseSpread: s.spread}
	stores := make([]*deferral.Store, deferredProcesses)
	for i := range stores {
		rdb := redis.NewClient(redisOpts)
		defer rdb.Close()
		stores[i] = deferral.New(rdb, nil, nil)
	}
	var (
		next  atomic.Int64
		size  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	deadline := open.Add(24 * time.Hour)
	for w := range deferredStorers {
		wg.Go(func() {
			store := stores[w%deferredProcesses]
			for {
				i := int(next.Add(1) - 1)
				if i >= s.messages || ctx.Err() != nil {
					return
				}
				m := deferredMessage(class, tally.id(i), i, deadline)
				size.Add(int64(len(m.Data)))
				j, err := store.Judge(ctx, m, rules)
				if err == nil && j.Verdict != deferral.Deferred {
					err = fmt.Errorf("message %s judged %v, want deferred", m.ID, j.Verdict)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(s.messages)) // stop every storer
					return
				}
				if (i+1)%(max(s.messages/10, 1)) == 0 {
					fmt.Fprintf(progress, "loadtest: deferred: %d stored\n", i+1)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(size.Load()) / float64(s.messages), ctx.Err()
}

// deferredMessage is a marketing message as a dispatcher defers it: its
// data with the id and deadline written in (dispatch.WithID) and one
// attribute.
func deferredMessage(class, id string, i int, deadline time.Time) deferral.Message {
	to := fmt.Sprintf("+3361%07d", i%10_000_000)
	data := fmt.Appendf(nil, `{"to":%q,"body":"Spring sale: 20%% off everything in store and online this weekend only. Reply STOP to opt out."}`, to)
	return deferral.Message{Class: class, ID: id, To: to, Deadline: deadline,
		Data: dispatch.WithID(data, id, deadline), Attributes: map[string]string{"campaign": "spring-sale"}}
}

// startReleasers starts deferredProcesses releasers of class, each with
// its own Redis and Pub/Sub clients and a clock shift ahead, the
// product's (code after) or releaseOneByOne (before); released[i] counts
// releaser i's. stop stops them, waits for them and flushes their
// publishers.
func startReleasers(ctx context.Context, redisOpts *redis.Options, pubsubAddr, class, code string, shift time.Duration,
	released []atomic.Int64, logger *slog.Logger) (stop func(), err error) {
	runCtx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		closers []func()
	)
	stop = func() {
		cancel()
		wg.Wait()
		for _, c := range closers {
			c()
		}
	}
	clock := func() time.Time { return time.Now().Add(shift) }
	for i := range deferredProcesses {
		ps, err := topology.NewClient(ctx, failoverProject, pubsubAddr)
		if err != nil {
			stop()
			return nil, err
		}
		pub := ps.Publisher(deferredTopic)
		rdb := redis.NewClient(redisOpts)
		closers = append(closers, func() { pub.Stop(); ps.Close(); rdb.Close() })
		store := deferral.New(rdb, clock, nil)
		lane := deferral.Lane{Class: class, Publisher: pub}
		token := fmt.Sprintf("releaser-%d", i)
		count := func(_ string, n int) { released[i].Add(int64(n)) }
		if code == codeBefore {
			wg.Go(func() { releaseOneByOne(runCtx, store, lane, token, count) })
			continue
		}
		rel := &deferral.Releaser{Store: store, Lanes: []deferral.Lane{lane}, Token: token, Logger: logger, Batch: deferredPage, Released: count}
		wg.Go(func() { rel.Run(runCtx) })
	}
	return stop, nil
}

// releaseOneByOne is the release as deferral.Releaser made it before a
// page's ids were removed in one call: the same loop (a page claimed,
// published, its confirmations waited for, a pass again at once after a
// full page, else after 0.5–1.5 s), with one remove call per message.
// No deadline passes in the scenario: the expired branch is left out.
func releaseOneByOne(ctx context.Context, s *deferral.Store, l deferral.Lane, token string, released func(string, int)) {
	for ctx.Err() == nil {
		claimed, _ := s.Claim(ctx, l.Class, deferredPage, token)
		results := make([]*pubsub.PublishResult, len(claimed))
		for i, c := range claimed {
			results[i] = l.Publisher.Publish(ctx, &pubsub.Message{Data: c.Data, Attributes: c.Attributes})
		}
		n := 0
		for i, res := range results {
			if _, err := res.Get(ctx); err != nil {
				continue
			}
			if ok, _ := s.Remove(ctx, l.Class, claimed[i].ID, token); ok {
				n++
			}
		}
		released(l.Class, n)
		if len(claimed) == deferredPage {
			continue
		}
		t := time.NewTimer(500*time.Millisecond + rand.N(time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// waitReleased polls until every id was published and the store of k is
// empty, or within ends; it reports whether it saw both.
func waitReleased(ctx context.Context, rdb *redis.Client, k keys.Deferred, tally *deferredTally, within time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	t := time.NewTicker(deferredPoll)
	defer t.Stop()
	for {
		if tally.complete() && storeSize(ctx, rdb, k) == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// storeSize is what the store of k holds: due ids, envelopes and claims
// (-1 when Redis did not answer).
func storeSize(ctx context.Context, rdb *redis.Client, k keys.Deferred) int64 {
	p := rdb.Pipeline()
	due, msgs, claims := p.ZCard(ctx, k.Due()), p.HLen(ctx, k.Messages()), p.HLen(ctx, k.Claims())
	if _, err := p.Exec(ctx); err != nil {
		return -1
	}
	return due.Val() + msgs.Val() + claims.Val()
}

// usedMemory is Redis's used_memory.
func usedMemory(ctx context.Context, rdb *redis.Client) (uint64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	return parseUsedMemory(info)
}

// warnCount counts the releasers' warnings (a release not confirmed, a
// remove that failed) and keeps the first one's message.
type warnCount struct {
	mu    sync.Mutex
	n     int
	first string
}

func (w *warnCount) read() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.first
}

// wrap returns next with w counting its records of level warn and above.
func (w *warnCount) wrap(next slog.Handler) slog.Handler { return warnHandler{next, w} }

type warnHandler struct {
	slog.Handler
	w *warnCount
}

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.Handler.Enabled(ctx, l)
}

func (h warnHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.w.mu.Lock()
		if h.w.n++; h.w.n == 1 {
			h.w.first = r.Message
		}
		h.w.mu.Unlock()
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as), h.w}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name), h.w}
}
