//go:build !nodemo

// The demo (`dispatcher demo`) and what it runs on (local.go) are left out
// of a build with -tags nodemo, as the Dockerfile's: the production image
// carries no in-process Pub/Sub, Redis or provider simulator (demo_off.go).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/telemetry"
)

// demoOptions are the demo's own flags.
type demoOptions struct {
	Instances int
	Campaign  int
	OTPRate   float64
	Timeout   time.Duration
	Progress  string // auto, on, off
	Traces    bool
	Fail5xx   time.Duration
	// CampaignSegments is how many segments each campaign body takes.
	CampaignSegments int
}

// runDemo is `dispatcher demo`: the real pipeline on one machine.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	load := config.Flags(fs, config.All, environ)
	var o demoOptions
	fs.IntVar(&o.Instances, "instances", 3, "dispatcher instances (each with its own Redis client and limiter, as pods)")
	fs.IntVar(&o.Campaign, "campaign", 3000, "marketing messages published at the start")
	fs.Float64Var(&o.OTPRate, "otp-rate", 5, "OTP messages published per second while the campaign runs")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "give up after this long")
	fs.StringVar(&o.Progress, "progress", "auto", "live progress line: auto (on a terminal), on, off")
	fs.BoolVar(&o.Traces, "traces", false, "print every span to stdout (OTEL_TRACES_EXPORTER=console); with --fail-5xx, re-sends show http.request.resend_count")
	fs.DurationVar(&o.Fail5xx, "fail-5xx", 0, "make the provider answer 503 for this long at the start, so that messages are re-sent")
	fs.IntVar(&o.CampaignSegments, "campaign-segments", 1, "segments of each campaign body (GSM-7); with --rate-unit segment the limiter counts them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if o.Instances < 1 || o.Campaign < 0 || o.OTPRate < 0 || o.CampaignSegments < 1 || o.CampaignSegments > 10 {
		return fmt.Errorf("demo: --instances must be ≥ 1, --campaign and --otp-rate ≥ 0, --campaign-segments 1-10")
	}
	r, err := demo(ctx, cfg, o, progressWriter(o.Progress, stdout))
	if err != nil {
		return err
	}
	r.print(stdout, cfg)
	if r.Throttled > 0 {
		return fmt.Errorf("demo: the provider answered 429 %d times", r.Throttled)
	}
	return nil
}

func progressWriter(mode string, stdout io.Writer) io.Writer {
	switch mode {
	case "on":
		return stdout
	case "off":
		return nil
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return stdout
		}
	}
	return nil
}

// demoReport is what one demo run measured.
type demoReport struct {
	Instances              int
	Elapsed                time.Duration
	Sent                   [2]int
	Expired, DeadLettered  int
	Nacked                 int
	NackedBy               map[string]int
	Throttled              int // 429 answers of the simulator
	Provider               string
	RateUnit               string
	CampaignSegments       int        // segments of each campaign body; OTP bodies are one
	MaxIn1s                int        // most provider acceptances in any 1 s window
	MaxSegmentsIn1s        int        // most accepted segments in any 1 s window
	Rate                   [2]float64 // sends per second of each class while it was sending
	OTPLatencyP50, P99     time.Duration
	OTPWaitP50, OTPWaitP99 time.Duration
	ScriptCalls, RedisCmds int64 // counted by the instances' clients
	EmbeddedRedis          bool
	// Redis's own figures (INFO commandstats since CONFIG RESETSTAT before
	// the traffic): script calls and every command executed, the scripts'
	// own included, less redisstats.NotWork. RedisStatsErr says why there
	// are none (miniredis keeps no such figures).
	RedisScripts, RedisExecuted int64
	RedisStatsErr               string
	// Published is how many messages the demo published, Deliveries how
	// many times pstest delivered them in all.
	Published, Deliveries int
}

func (r demoReport) print(w io.Writer, cfg config.Settings) {
	sent := r.Sent[0] + r.Sent[1]
	per := func(n int64) float64 { return float64(n) / float64(max(sent, 1)) }
	redis := "real Redis (REDIS_URL)"
	if r.EmbeddedRedis {
		redis = "embedded Redis (miniredis)"
	}
	unit := "messages"
	if r.Provider != "generic" || r.RateUnit == "segment" {
		unit = "segments"
	}
	fmt.Fprintf(w, "\nsms-dispatcher demo: %d instances, in-process Pub/Sub, %s, %s provider simulator (strict 1 s window of CONTRACT_RPS=%g %s), rates in %ss\n",
		r.Instances, redis, r.Provider, cfg.ContractRPS, unit, r.RateUnit)
	fmt.Fprintf(w, "  elapsed                          %v\n", r.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  sent                             %d (otp %d, marketing %d)\n", sent, r.Sent[admission.OTP], r.Sent[admission.Marketing])
	fmt.Fprintf(w, "  expired / dead-lettered          %d / %d\n", r.Expired, r.DeadLettered)
	// In the unit the rates count: with RATE_UNIT=segment, a campaign
	// message is CampaignSegments units.
	units := 1.0
	if r.RateUnit == "segment" {
		units = float64(max(r.CampaignSegments, 1))
	}
	mkt := r.Rate[admission.Marketing] * units
	fmt.Fprintf(w, "  marketing rate while busy        %.1f %ss/s = %.2f of MARKETING_RPS %g (its cap)\n", mkt, r.RateUnit, mkt/cfg.MarketingRPS, cfg.MarketingRPS)
	fmt.Fprintf(w, "  total rate while busy            %.1f %ss/s of TARGET_RPS %g (OTP came at %.1f/s)\n", mkt+r.Rate[admission.OTP], r.RateUnit, cfg.TargetRPS, r.Rate[admission.OTP])
	fmt.Fprintf(w, "  most accepted in any 1 s         %d messages, %d segments (contract %g, TARGET_RPS+BURST %g)\n", r.MaxIn1s, r.MaxSegmentsIn1s, cfg.ContractRPS, cfg.TargetRPS+float64(cfg.Burst))
	fmt.Fprintf(w, "  429 answers                      %d\n", r.Throttled)
	fmt.Fprintf(w, "  OTP publish→provider p50 / p99   %v / %v\n", r.OTPLatencyP50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
	fmt.Fprintf(w, "  OTP wait for a slot p50 / p99     %v / %v\n", r.OTPWaitP50.Round(10*time.Microsecond), r.OTPWaitP99.Round(10*time.Microsecond))
	fmt.Fprintf(w, "  nacks per sent message           %.3f %v\n", per(int64(r.Nacked)), r.NackedBy)
	fmt.Fprintf(w, "  admission calls per sent message %.2f (as the clients counted them)\n", per(r.ScriptCalls))
	fmt.Fprintf(w, "  Redis commands per sent message  %.2f sent by the clients (admission + send-once claim and record; heartbeats)\n", per(r.RedisCmds))
	if r.RedisStatsErr != "" {
		fmt.Fprintf(w, "  script calls per sent message    n/a: %s\n", r.RedisStatsErr)
		fmt.Fprintf(w, "  Redis executed per sent message  n/a\n")
	} else {
		fmt.Fprintf(w, "  script calls per sent message    %.2f (Redis's INFO commandstats: EVALSHA, EVAL, FCALL)\n", per(r.RedisScripts))
		// Less redisstats.NotWork: connection setup, PING, COMMAND and
		// CLUSTER of the clients, and the measurement's CONFIG and INFO.
		fmt.Fprintf(w, "  Redis executed per sent message  %.2f commands (Redis's count, the scripts' own included, less connection setup, PING and the measurement)\n",
			per(r.RedisExecuted))
	}
	fmt.Fprintf(w, "  deliveries per published message %.3f (Pub/Sub, of %d published)\n",
		float64(r.Deliveries)/float64(max(r.Published, 1)), r.Published)
}

// demoStats collects events of every instance. Safe for concurrent use.
type demoStats struct {
	mu         sync.Mutex
	sent       [2]int
	done       map[string]bool // message ids that reached an end
	expired    int
	dead       int
	nacked     int
	nackedBy   map[string]int // outcome -> nacks
	otpLatency []time.Duration
	otpWait    []time.Duration // received → slot
	first      [2]time.Time    // first and last send of each class
	last       [2]time.Time
	changed    chan struct{} // signalled after each end
}

func (s *demoStats) Observe(ev dispatch.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Action {
	case nack.Nack:
		s.nacked++
		s.nackedBy[ev.Outcome.String()]++
		return
	case nack.DeadLetter:
		s.dead++
	}
	switch ev.Outcome {
	case nack.Sent:
		s.sent[ev.Class]++
		if s.first[ev.Class].IsZero() {
			s.first[ev.Class] = ev.Finished
		}
		s.last[ev.Class] = ev.Finished
		if ev.Class == admission.OTP {
			s.otpLatency = append(s.otpLatency, ev.Finished.Sub(ev.PublishTime))
			s.otpWait = append(s.otpWait, ev.Admitted.Sub(ev.Received))
		}
	case nack.Expired:
		s.expired++
	}
	s.done[ev.MessageID] = true
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// counter counts the Redis commands of one client, and the admission
// script calls among them.
type counter struct{ cmds, scripts atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd.Args())
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd.Args())
		}
		return next(ctx, cmds)
	}
}
func (c *counter) count(args []any) {
	name := strings.ToLower(fmt.Sprint(args[0]))
	if name == "hello" || name == "client" {
		return
	}
	c.cmds.Add(1)
	if (name == "evalsha" || name == "eval") && len(args) > 3 && strings.HasSuffix(fmt.Sprint(args[3]), ":tat:global") {
		c.scripts.Add(1)
	}
}

// demo runs the pipeline and returns its report.
func demo(ctx context.Context, cfg config.Settings, o demoOptions, progress io.Writer) (demoReport, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stack, err := startLocal(cfg, providertest.Config{Limit: int(cfg.ContractRPS), Window: time.Second, RetryAfter: time.Second})
	if err != nil {
		return demoReport{}, err
	}
	defer stack.Close()
	cfg = stack.providerConfig(cfg)

	admin, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
	if err != nil {
		return demoReport{}, err
	}
	defer admin.Close()
	if err := setupTopology(ctx, admin, cfg, true, func(string, string, string) {}); err != nil {
		return demoReport{}, err
	}

	stats := &demoStats{done: map[string]bool{}, nackedBy: map[string]int{}, changed: make(chan struct{}, 1)}
	var tel *telemetrySet
	if o.Traces {
		// Console traces, as OTEL_TRACES_EXPORTER=console would give.
		getenv := func(k string) string {
			if k == "OTEL_TRACES_EXPORTER" {
				return "console"
			}
			return environ(k)
		}
		tr, err := telemetry.SetupTracing(ctx, getenv)
		if err != nil {
			return demoReport{}, err
		}
		m, err := telemetry.NewMetrics()
		if err != nil {
			return demoReport{}, err
		}
		tel = &telemetrySet{Tracing: tr, metrics: m}
		defer tel.shutdown(context.WithoutCancel(ctx), logger)
	}
	var counters []*counter
	start := time.Now()
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	var running sync.WaitGroup
	// Closers run after every dispatcher has stopped, whatever happens.
	var closers []func()
	defer func() {
		stopRun()
		running.Wait()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	for i := range o.Instances {
		rdb, err := stack.newRedis()
		if err != nil {
			return demoReport{}, err
		}
		closers = append(closers, func() { rdb.Close() })
		c := &counter{}
		rdb.AddHook(c)
		counters = append(counters, c)
		ps, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
		if err != nil {
			return demoReport{}, err
		}
		closers = append(closers, func() { ps.Close() })
		sender, secret, err := newProvider(cfg.Process, cfg.Account, tel)
		if err != nil {
			return demoReport{}, err
		}
		closers = append(closers, sender.CloseIdleConnections)
		inst, err := newInstance(cfg, []instanceAccount{{setup: cfg.Account, sender: sender, creds: secret}}, rdb, ps, true, tel, stats, logger.With("instance", i))
		if err != nil {
			return demoReport{}, err
		}
		closers = append(closers, inst.close)
		running.Go(func() { inst.run(runCtx) })
	}
	if o.Fail5xx > 0 {
		stack.Sim.FailFor(http.StatusServiceUnavailable, o.Fail5xx)
	}

	// Redis's own count starts here, after the setup and before the
	// traffic, on a client of its own: CONFIG RESETSTAT clears the figures
	// of the whole server (with REDIS_URL, for its other users too).
	statsRdb, err := stack.newRedis()
	if err != nil {
		return demoReport{}, err
	}
	closers = append(closers, func() { statsRdb.Close() })
	statsErr := redisstats.Reset(ctx, statsRdb)

	var lastSent int
	show := func() {
		if progress == nil {
			return
		}
		stats.mu.Lock()
		sent := stats.sent[0] + stats.sent[1]
		line := fmt.Sprintf("\r%5.0fs  sent %6d (otp %4d, marketing %6d)  %5.1f/s  OTP p99 %-8v  429s %d   ",
			time.Since(start).Seconds(), sent, stats.sent[0], stats.sent[1], float64(sent-lastSent),
			p99(stats.otpLatency).Round(100*time.Microsecond), stack.Sim.Stats().Throttled)
		lastSent = sent
		stats.mu.Unlock()
		io.WriteString(progress, line)
	}
	published, err := produce(ctx, admin, cfg, o, stats, show)
	if progress != nil {
		io.WriteString(progress, "\n")
	}
	stopRun()
	running.Wait()
	if err != nil {
		return demoReport{}, err
	}

	r := demoReport{Instances: o.Instances, Elapsed: time.Since(start), EmbeddedRedis: stack.Embedded()}
	stats.mu.Lock()
	r.Sent, r.Expired, r.DeadLettered, r.Nacked = stats.sent, stats.expired, stats.dead, stats.nacked
	r.NackedBy = maps.Clone(stats.nackedBy)
	for c := range 2 {
		if busy := stats.last[c].Sub(stats.first[c]).Seconds(); busy > 0 {
			r.Rate[c] = float64(r.Sent[c]-1) / busy
		}
	}
	r.OTPLatencyP50, r.P99 = quantile(stats.otpLatency, 0.50), quantile(stats.otpLatency, 0.99)
	r.OTPWaitP50, r.OTPWaitP99 = quantile(stats.otpWait, 0.50), quantile(stats.otpWait, 0.99)
	stats.mu.Unlock()
	st := stack.Sim.Stats()
	r.Throttled = st.Throttled + st.SuspendedAnswers
	var accepted, segments []time.Time
	for _, a := range stack.Sim.Arrivals() {
		if a.Outcome == "accepted" {
			accepted = append(accepted, a.At)
			for range a.Segments {
				segments = append(segments, a.At)
			}
		}
	}
	r.MaxIn1s = providertest.MaxInAnyWindow(accepted, time.Second)
	r.MaxSegmentsIn1s = providertest.MaxInAnyWindow(segments, time.Second)
	r.Provider, r.RateUnit, r.CampaignSegments = cfg.Provider, cfg.RateUnit, o.CampaignSegments
	for _, c := range counters {
		r.ScriptCalls += c.scripts.Load()
		r.RedisCmds += c.cmds.Load()
	}
	// Read once every instance has stopped: its last commands count too.
	if statsErr == nil {
		var cs redisstats.CommandStats
		if cs, statsErr = redisstats.Read(ctx, statsRdb); statsErr == nil {
			r.RedisScripts, r.RedisExecuted = cs.Scripts(), cs.Executed()
		}
	}
	switch {
	case statsErr != nil && r.EmbeddedRedis:
		r.RedisStatsErr = "miniredis keeps no INFO commandstats (set REDIS_URL to a real Redis)"
	case statsErr != nil:
		r.RedisStatsErr = statsErr.Error()
	}
	// Deliveries of the messages the demo published, not of the dead
	// letters the instances published.
	mine := map[string]bool{}
	for _, id := range published {
		mine[id] = true
	}
	for _, m := range stack.Pubsub.Messages() {
		if mine[m.ID] {
			r.Published++
			r.Deliveries += m.Deliveries
		}
	}
	return r, nil
}

// produce publishes the campaign at once and OTPs at o.OTPRate while it
// runs, shows progress, and returns once every published message reached
// an end (or ctx or the timeout ends the run), with the server's ids of
// the messages it published.
func produce(ctx context.Context, ps *pubsub.Client, cfg config.Settings, o demoOptions, stats *demoStats, progress func()) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	mkt, otp := ps.Publisher(cfg.MarketingTopic), ps.Publisher(cfg.OTPTopic)
	defer mkt.Stop()
	defer otp.Stop()

	var ids []string
	var results []*pubsub.PublishResult
	publish := func(p *pubsub.Publisher, m map[string]string) {
		b, _ := json.Marshal(m)
		results = append(results, p.Publish(ctx, &pubsub.Message{Data: b}))
	}
	phone := func() string { return fmt.Sprintf("+8190%08d", rand.IntN(1e8)) }
	// Ids of this run alone: with REDIS_URL, a Redis that kept the
	// send-once records of an earlier demo would find every id sent.
	run := strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36)
	for i := range o.Campaign {
		publish(mkt, map[string]string{"id": fmt.Sprintf("campaign-%s-%d", run, i), "to": phone(), "body": campaignBody(o.CampaignSegments)})
	}

	var tick <-chan time.Time
	if o.OTPRate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.OTPRate))
		defer t.Stop()
		tick = t.C
	}
	show := time.NewTicker(time.Second)
	defer show.Stop()
	otpN := 0
	campaignDone := func() bool {
		stats.mu.Lock()
		defer stats.mu.Unlock()
		return stats.sent[admission.Marketing]+stats.expired+stats.dead >= o.Campaign
	}
	for {
		for len(ids) < len(results) { // collect server IDs as they come
			id, err := results[len(ids)].Get(ctx)
			if err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			ids = append(ids, id)
		}
		if campaignDone() {
			tick = nil // the OTP stream ends with the campaign
			if allDone(stats, ids) {
				return ids, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("demo did not finish: %w", ctx.Err())
		case <-tick:
			otpN++
			publish(otp, map[string]string{
				"id": fmt.Sprintf("otp-%s-%d", run, otpN), "to": phone(),
				"body":     fmt.Sprintf("Your code is %06d", rand.IntN(1e6)),
				"deadline": time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
			})
		case <-show.C:
			progress()
		case <-stats.changed:
		}
	}
}

func allDone(stats *demoStats, ids []string) bool {
	stats.mu.Lock()
	defer stats.mu.Unlock()
	for _, id := range ids {
		if !stats.done[id] {
			return false
		}
	}
	return true
}

// quantile returns the q-quantile of ds (nearest rank), 0 if empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func p99(ds []time.Duration) time.Duration { return quantile(ds, 0.99) }

// campaignBody returns a GSM-7 campaign text of n segments.
func campaignBody(n int) string {
	const text = "Winter sale: 20% off this weekend"
	if n <= 1 {
		return text
	}
	b := strings.Repeat(text+" ", 153*n/len(text)+1)
	return b[:153*n-10] // more than 153×(n-1): n segments
}
