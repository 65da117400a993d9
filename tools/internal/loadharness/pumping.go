package loadharness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/dispatch"
	"smsdispatcher/internal/keys"
	"smsdispatcher/nack"
)

// The pumping scenario: pumpingInstances processes as serve wires them
// (the guard built from ACCOUNTS_FILE's classes), an OTP and marketing
// account and an OTP backup it fails over to (each its own simulator;
// the primary answers 503 for pumpingStorm from pumpingStormAt, so that
// OTPs go out through both), legitimate OTP at --otp-rate to many ranges
// (80 % of them verified: {"id"} published to VERIFICATIONS_TOPIC
// pumpingVerifyAfter after the send) and an attack to random numbers of
// two ranges, none verified. Rows (--guard-rows):
//   - off: no guard, the attack at --attack-rate for --duration;
//   - on: the guard of docs/guard.md's example (max_per_prefix digits 6,
//     count 300 per 10m; min_conversion ratio 0.2, min_sends 50 per 30m,
//     digits 5, its grace 60s), the same traffic: the range brake's;
//   - slow: the same guard with min_conversion's grace --guard-grace, an
//     attack at --slow-attack-rate to two other ranges until
//     pumpingAfterBlocks after both are blocked (at most pumpingSlowMax):
//     the conversion rule's.
const (
	scenPumping = "pumping"

	pumpingInstances   = 3
	pumpingLegitRate   = 5.0
	pumpingAttackRate  = 40.0
	pumpingSlowRate    = 1.0
	pumpingDuration    = 30 * time.Second
	pumpingSlowMax     = 3 * time.Minute
	pumpingGrace       = 2 * time.Second
	pumpingVerifyShare = 5 // every 5th legitimate OTP is not verified: 80 % are
	pumpingVerifyAfter = 500 * time.Millisecond
	pumpingStormAt     = 8 * time.Second
	pumpingStorm       = 8 * time.Second
	pumpingDrain       = 5 * time.Second
	// pumpingAfterBlocks is how long the slow attack goes on once its
	// ranges are blocked.
	pumpingAfterBlocks = 10 * time.Second
	// pumpingSlack is what an attack range may get past the rule's
	// figure: count + 5 sends by the range brake, min_sends + 5 by the
	// conversion rule.
	pumpingSlack = 5
	// The guard of docs/guard.md's example.
	pumpingPrefixDigits = 6
	pumpingPrefixCount  = 300
	pumpingConvDigits   = 5
	pumpingMinSends     = 50
	pumpingRatio        = 0.2
	// pumpingSample is how often the blocks are read during a row.
	pumpingSample = 200 * time.Millisecond
)

// The rows of --guard-rows.
const (
	guardOff  = "off"
	guardOn   = "on"
	guardSlow = "slow"
)

var allGuardRows = []string{guardOff, guardOn, guardSlow}

// The attack's ranges (6 digits after the +, each in a range of 5 of its
// own): the fast attack's, and the slow one's.
var (
	fastRanges = []string{"882340", "881230"}
	slowRanges = []string{"882350", "881240"}
)

// pumpingSettings are the scenario's flags.
type pumpingSettings struct {
	rows                 string
	rowList              []string
	attackRate, slowRate float64
	grace                time.Duration
	duration             time.Duration // the off and on rows'
	legitRate            float64
}

// pumpingFlags defines the scenario's own flags on fs.
func pumpingFlags(fs *flag.FlagSet, p *pumpingSettings) {
	fs.StringVar(&p.rows, "guard-rows", strings.Join(allGuardRows, ","), "with --scenario pumping, the rows (comma list): off (no guard), on (the guard, a fast attack), slow (the guard, a slow attack, min_conversion's grace --guard-grace)")
	fs.Float64Var(&p.attackRate, "attack-rate", pumpingAttackRate, "with --scenario pumping, the fast attack's OTPs a second over its two ranges")
	fs.Float64Var(&p.slowRate, "slow-attack-rate", pumpingSlowRate, "with --scenario pumping, the slow attack's OTPs a second over its two ranges")
	fs.DurationVar(&p.grace, "guard-grace", pumpingGrace, "with --scenario pumping, min_conversion's grace in the slow row (the product's default is 60s: an attack of r a second a range then sends min_sends + 60r before its block)")
}

// pumpingOwnFlags are the flags only the pumping scenario takes.
var pumpingOwnFlags = []string{"guard-rows", "attack-rate", "slow-attack-rate", "guard-grace"}

// checkPumping checks the scenario's settings of c (set: the flags
// given): it takes --duration, --otp-rate and its own.
func checkPumping(c *Config, set map[string]bool) error {
	p := &c.pumping
	if !c.pumpingRun {
		for _, name := range pumpingOwnFlags {
			if set[name] {
				return fmt.Errorf("--%s applies to --scenario %s", name, scenPumping)
			}
		}
		return nil
	}
	var err error
	if p.rowList, err = parseNames(p.rows, allGuardRows); err != nil {
		return fmt.Errorf("--guard-rows: %w", err)
	}
	p.duration, p.legitRate = pumpingDuration, pumpingLegitRate
	if set["duration"] {
		p.duration = c.duration
	}
	if set["otp-rate"] {
		p.legitRate = c.otpRate
	}
	switch {
	case p.duration < 5*time.Second || p.duration > 30*time.Minute:
		return fmt.Errorf("--duration must be 5s to 30m with --scenario %s, got %v", scenPumping, p.duration)
	case p.legitRate <= 0 || p.legitRate > 20:
		return fmt.Errorf("--otp-rate must be in (0, 20] with --scenario %s, got %v", scenPumping, p.legitRate)
	case p.attackRate <= 0 || p.legitRate+p.attackRate > classesTarget:
		return fmt.Errorf("--attack-rate must be positive and with --otp-rate at most TARGET_RPS %d, got %v", classesTarget, p.attackRate)
	case p.slowRate <= 0 || p.slowRate > 10:
		return fmt.Errorf("--slow-attack-rate must be in (0, 10], got %v", p.slowRate)
	case p.grace <= 0 || p.grace > time.Minute:
		return fmt.Errorf("--guard-grace must be in (0, 1m], got %v", p.grace)
	}
	return nil
}

// pumpingSpec is one row's settings.
type pumpingSpec struct {
	row        string
	guard      bool
	grace      time.Duration // min_conversion's; 0: the product's default
	ranges     []string      // the attack's
	attackRate float64
	legitRate  float64
	// duration is the row's traffic; a row with untilBlocked stops
	// earlier once every attack range is blocked.
	duration     time.Duration
	untilBlocked bool
}

// pumpingSpecs are the rows s asks for.
func pumpingSpecs(p pumpingSettings) []pumpingSpec {
	var out []pumpingSpec
	for _, row := range p.rowList {
		s := pumpingSpec{row: row, ranges: fastRanges, attackRate: p.attackRate, legitRate: p.legitRate, duration: p.duration}
		switch row {
		case guardOn:
			s.guard = true
		case guardSlow:
			s.guard, s.grace, s.ranges, s.attackRate = true, p.grace, slowRanges, p.slowRate
			s.duration, s.untilBlocked = pumpingSlowMax, true
		}
		out = append(out, s)
	}
	return out
}

// pumpingAccounts is the ACCOUNTS_FILE of s: an OTP and marketing
// account and an OTP backup, the guard on the otp class when s has it.
func pumpingAccounts(ns string, s pumpingSpec) func(primary, backup string) string {
	return func(primary, backup string) string {
		var b strings.Builder
		if s.guard {
			grace := ""
			if s.grace > 0 {
				grace = fmt.Sprintf(", grace: %s", s.grace)
			}
			fmt.Fprintf(&b, "classes:\n  - name: otp\n    max_per_prefix: {digits: %d, count: %d, per: 10m, block_for: 1h}\n"+
				"    min_conversion: {ratio: %g, min_sends: %d, per: 30m, digits: %d, block_for: 1h%s}\n  - name: marketing\n",
				pumpingPrefixDigits, pumpingPrefixCount, pumpingRatio, pumpingMinSends, pumpingConvDigits, grace)
		}
		fmt.Fprintf(&b, "accounts:\n  - name: %s-main\n    provider: generic\n    generic: {url: %q, token: %q}\n"+
			"    contract_rps: %d\n    target_rps: %d\n    burst: %d\n    classes: [otp, marketing]\n    class_rps: {marketing: %d}\n",
			ns, primary, simToken, contractRPS, classesTarget, classesBurst, classesMktRPS)
		fmt.Fprintf(&b, "  - name: %s-backup\n    provider: generic\n    generic: {url: %q, token: %q}\n"+
			"    contract_rps: %d\n    target_rps: %d\n    burst: %d\n    classes: [otp]\n",
			ns, backup, simToken, contractRPS, classesTarget, classesBurst)
		return b.String()
	}
}

// A pumpingMsg is one published OTP: legitimate or the attack's, the
// attack's range, and whether its code is used.
type pumpingMsg struct {
	attack    bool
	rng       string // the attack's range; "" for a legitimate OTP
	verify    bool
	published time.Time
}

// legitNumber is the n-th legitimate recipient: +447, then one of 1,000
// ranges of 6 digits (100 of 5).
func legitNumber(n int) string { return fmt.Sprintf("+447%03d%06d", (n*7919)%1000, n%1_000_000) }

// pumpingLog is a row's published OTPs by id, and the blocks as they
// appeared. Safe for concurrent use.
type pumpingLog struct {
	mu     sync.Mutex
	msgs   map[string]pumpingMsg // guarded by mu
	blocks []blockSeen           // guarded by mu: in the order seen
}

// blockSeen is a block first read At into the row.
type blockSeen struct {
	At              time.Duration
	Range, Reason   string
	Sends, Verified int
}

func (l *pumpingLog) add(id string, m pumpingMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[id] = m
}

func (l *pumpingLog) msg(id string) (pumpingMsg, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.msgs[id]
	return m, ok
}

// blocked reports whether every one of ranges has been seen blocked.
func (l *pumpingLog) blocked(ranges []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range ranges {
		if blockOf(l.blocks, r) == nil {
			return false
		}
	}
	return true
}

// blockOf is the first of blocks that holds range rng (a block of its
// first digits: min_conversion's ranges are shorter than the attack's);
// nil: none.
func blockOf(blocks []blockSeen, rng string) *blockSeen {
	for i := range blocks {
		if strings.HasPrefix(rng, blocks[i].Range) {
			return &blocks[i]
		}
	}
	return nil
}

// watchBlocks reads the otp class's blocks every pumpingSample until ctx
// ends, logging each range's first block.
func (l *pumpingLog) watchBlocks(ctx context.Context, rdb redis.UniversalClient, start time.Time) {
	t := time.NewTicker(pumpingSample)
	defer t.Stop()
	for {
		m, err := rdb.HGetAll(ctx, keys.GuardOf("otp").Blocks()).Result()
		if err == nil {
			l.mu.Lock()
			for r, v := range m {
				l.noteBlock(time.Since(start), r, v)
			}
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// noteBlock logs range r's block of value v ("reason until sends
// verified") if it is its first; l.mu is held.
func (l *pumpingLog) noteBlock(at time.Duration, r, v string) {
	for _, b := range l.blocks {
		if b.Range == r {
			return
		}
	}
	b := blockSeen{At: at, Range: r}
	var until int64
	if _, err := fmt.Sscanf(v, "%s %d %d %d", &b.Reason, &until, &b.Sends, &b.Verified); err == nil {
		l.blocks = append(l.blocks, b)
	}
}

// runPumpingRows runs the rows of cfg one after the other on the Redis
// at redisURL, the guard's keys cleared before each and after the last.
func runPumpingRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*pumpingRow, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	clear := func() error { return clearGuard(context.WithoutCancel(ctx), rdb) }
	defer clear()
	specs := pumpingSpecs(cfg.pumping)
	var rows []*pumpingRow
	for i, s := range specs {
		if err := clear(); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario pumping, guard %s (up to %v)\n", i+1, len(specs), s.row, s.duration)
		r, err := runPumping(ctx, cfg, redisURL, s, progress)
		if err != nil {
			return nil, fmt.Errorf("run scenario pumping %s: %w", s.row, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// clearGuard deletes the otp class's guard keys: the blocks hold for an
// hour, and the counts of a row would be the next one's.
func clearGuard(ctx context.Context, rdb *redis.Client) error {
	iter := rdb.Scan(ctx, 0, keys.GuardOf("otp").Prefix()+"*", 1000).Iterator()
	var names []string
	for iter.Next(ctx) {
		names = append(names, iter.Val())
	}
	if err := iter.Err(); err != nil || len(names) == 0 {
		return err
	}
	return rdb.Del(ctx, names...).Err()
}

// runPumping runs one row and measures it.
func runPumping(ctx context.Context, cfg *Config, redisURL string, s pumpingSpec, progress io.Writer) (*pumpingRow, error) {
	ns, logger := newRun(cfg)
	plog := &pumpingLog{msgs: map[string]pumpingMsg{}}
	lg := newEndLog()
	spec := stackSpec{instances: pumpingInstances, redisURL: redisURL, accountsFile: pumpingAccounts(ns, s), backup: true,
		observer: lg, logger: logger, redisTimeout: cfg.redisTO}
	st, err := startServeStack(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer st.close()
	verifications := st.admin.Publisher(st.cfg.VerificationsTopic)
	defer verifications.Stop()
	var verifying sync.WaitGroup
	verified := 0
	var vmu sync.Mutex
	lg.onEnd = func(ev dispatch.Event) {
		m, ok := plog.msg(ev.ID)
		if !ok || !m.verify || ev.Outcome != nack.Sent {
			return
		}
		verifying.Add(1)
		time.AfterFunc(pumpingVerifyAfter, func() {
			defer verifying.Done()
			if _, err := publishJSON(ctx, verifications, map[string]string{"id": ev.ID}).Get(ctx); err == nil {
				vmu.Lock()
				verified++
				vmu.Unlock()
			}
		})
	}
	if err := st.run(ctx, spec); err != nil {
		return nil, err
	}
	if err := st.started(ctx, suppressionsStart); err != nil {
		return nil, err
	}
	statsErr := st.resetCost(ctx)
	start := time.Now()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { plog.watchBlocks(watchCtx, st.stats, start) })
	storm := time.AfterFunc(pumpingStormAt, func() { st.stack.Sim.FailFor(http.StatusServiceUnavailable, pumpingStorm) })
	defer storm.Stop()

	ids, err := publishPumpingTraffic(ctx, st, s, ns, plog)
	stopWatch()
	watching.Wait()
	if err != nil {
		return nil, err
	}
	unended := lg.waitEnded(ctx, ids, pumpingDrain)
	fmt.Fprintf(progress, "loadtest: traffic over in %v, %d OTPs without an end\n", time.Since(start).Round(time.Millisecond), unended)
	st.stop()
	verifying.Wait()
	cost := st.readCost(ctx, statsErr)
	ends, nacks := lg.snapshot()
	return measurePumping(s, pumpingRun{start: start, msgs: plog.msgs, blocks: plog.blocks, ends: ends, nacks: nacks,
		primary: st.stack.Sim.Arrivals(), backup: st.backup.Arrivals(), cost: cost, verified: verified}), nil
}

// publishPumpingTraffic publishes the legitimate OTPs and the attack at
// their rates for s.duration (with s.untilBlocked, until every attack
// range has been seen blocked and pumpingAfterBlocks more), and returns their
// ids once Pub/Sub has them.
func publishPumpingTraffic(ctx context.Context, st *serveStack, s pumpingSpec, ns string, plog *pumpingLog) ([]string, error) {
	pub := st.admin.Publisher(st.cfg.OTPTopic)
	defer pub.Stop()
	var ids []string
	var results []*pubsub.PublishResult
	send := func(id, to string, m pumpingMsg) {
		m.published = time.Now()
		plog.add(id, m)
		ids = append(ids, id)
		results = append(results, publishJSON(ctx, pub, map[string]string{"id": id, "to": to, "body": "Your code is 482913",
			"deadline": m.published.Add(classesOTPLife).UTC().Format(time.RFC3339)}))
	}
	legit := time.NewTicker(time.Duration(float64(time.Second) / s.legitRate))
	defer legit.Stop()
	attack := time.NewTicker(time.Duration(float64(time.Second) / s.attackRate))
	defer attack.Stop()
	end := time.NewTimer(s.duration)
	defer end.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	nl, na := 0, 0
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-end.C:
			done = true
		case <-check.C:
			if s.untilBlocked && plog.blocked(s.ranges) {
				end.Reset(pumpingAfterBlocks) // the attack goes on a while, blocked
				s.untilBlocked = false
			}
		case <-legit.C:
			send(fmt.Sprintf("%s-l%d", ns, nl), legitNumber(nl), pumpingMsg{verify: nl%pumpingVerifyShare != 0})
			nl++
		case <-attack.C:
			r := s.ranges[na%len(s.ranges)]
			send(fmt.Sprintf("%s-a%d", ns, na), fmt.Sprintf("+%s%06d", r, rand.IntN(1_000_000)), pumpingMsg{attack: true, rng: r})
			na++
		}
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	return ids, nil
}
