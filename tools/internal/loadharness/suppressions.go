package loadharness

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/suppress"
)

// The suppressions scenario: the demo's traffic (suppressionsInstances
// processes as serve wires them, a campaign of suppressionsCampaign
// marketing messages and OTP at --otp-rate while it runs) with every
// suppressEvery-th recipient a number of the list, in two rows side by
// side: the list empty, then --list-size numbers imported as `dispatcher
// suppressions import` does (Store.Import, batches of
// suppressionsImportBatch; the mirror to SUPPRESSIONS_TOPIC left out:
// pstest would hold a million messages). The list row also gives the
// import's time, Redis's memory per number (used_memory across the import,
// and MEMORY USAGE of the list's hash) and a process's (the heap a List's
// Load takes).
const (
	scenSuppressions = "suppressions"

	suppressionsInstances   = 3
	suppressionsCampaign    = 3000
	suppressionsOTPRate     = 5.0
	suppressionsListSize    = 1_000_000
	suppressEvery           = 50 // 2 % of recipients
	suppressionsImportBatch = 10_000
	// suppressionsTimeout bounds a row's traffic; suppressionsDrain the
	// wait, after the campaign ended, for the last OTPs' ends.
	suppressionsTimeout = 3 * time.Minute
	suppressionsDrain   = 5 * time.Second
	// suppressionsStart bounds the instances' start: each loads the list
	// first.
	suppressionsStart = 2 * time.Minute
	// The list row's criterion: no listed recipient sent, each refused
	// as suppressed, every message ended, and at most this many script
	// calls per sent message (the demo's target; no receipts here).
	suppressionsMaxScripts = 2.05
)

// checkSuppressions checks the scenario's settings of c (set: the flags
// given): it takes --otp-rate and --list-size.
func checkSuppressions(c *Config, set map[string]bool) error {
	if !c.suppressionsRun {
		if set["list-size"] {
			return fmt.Errorf("--list-size applies to --scenario %s", scenSuppressions)
		}
		return nil
	}
	c.suppressionsOTPRate = suppressionsOTPRate
	if set["otp-rate"] {
		c.suppressionsOTPRate = c.otpRate
	}
	switch {
	case c.suppressionsOTPRate <= 0 || c.suppressionsOTPRate > 20:
		return fmt.Errorf("--otp-rate must be in (0, 20] with --scenario %s, got %v", scenSuppressions, c.suppressionsOTPRate)
	case c.listSize < 1 || c.listSize > 10_000_000:
		return fmt.Errorf("--list-size must be 1 to 10,000,000, got %d", c.listSize)
	}
	return nil
}

// listedNumber is the list's number i: +1 and ten digits, apart from
// every other recipient (+8190...).
func listedNumber(i int) string { return fmt.Sprintf("+1%010d", 2_000_000_000+i*7) }

// recipientOf is the traffic's n-th recipient: every suppressEvery-th a
// number of a list of size numbers (spread over it), the others numbers
// of their own.
func recipientOf(n, size int) (to string, listed bool) {
	if n%suppressEvery == 0 {
		return listedNumber((n / suppressEvery * 7919) % size), true
	}
	return fmt.Sprintf("+8190%08d", n), false
}

// runSuppressionsRows runs the row without a list, imports the list, runs
// the row with it, and removes the list.
func runSuppressionsRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*suppressionsRow, error) {
	admin, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(admin)
	defer rdb.Close()
	names := keys.Suppress()
	clear := func() error {
		return rdb.Del(context.WithoutCancel(ctx), names.List(), names.Log(), names.Seq()).Err()
	}
	if err := clear(); err != nil {
		return nil, err
	}
	defer clear()

	fmt.Fprintf(progress, "loadtest: run 1/2: scenario suppressions, no list\n")
	without, err := runSuppressionsRow(ctx, cfg, redisURL, 0, progress)
	if err != nil {
		return nil, fmt.Errorf("run scenario suppressions without a list: %w", err)
	}
	fmt.Fprintf(progress, "loadtest: importing %d numbers\n", cfg.listSize)
	mem, err := importList(ctx, rdb, cfg.listSize)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "loadtest: imported in %v; run 2/2: scenario suppressions, %d numbers\n", mem.Import.Round(time.Millisecond), cfg.listSize)
	with, err := runSuppressionsRow(ctx, cfg, redisURL, cfg.listSize, progress)
	if err != nil {
		return nil, fmt.Errorf("run scenario suppressions with the list: %w", err)
	}
	with.Memory = &mem
	return []*suppressionsRow{without, with}, nil
}

// listMemory is what the list of Size numbers costs.
type listMemory struct {
	Size         int
	Import       time.Duration // Store.Import of the whole list
	RedisBytes   float64       // used_memory's growth across the import, a number
	HashBytes    float64       // MEMORY USAGE of the list's hash, a number
	ProcessBytes float64       // the heap a List's Load takes, a number
	Load         time.Duration // one List's Load
}

// importList imports size numbers as `dispatcher suppressions import`
// does and measures what they cost in Redis and in a process.
func importList(ctx context.Context, rdb *redis.Client, size int) (listMemory, error) {
	m := listMemory{Size: size}
	store := suppress.NewStore(rdb, "", nil)
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	at := time.Now().UTC()
	batch := make([]suppress.Entry, 0, suppressionsImportBatch)
	start := time.Now()
	for i := range size {
		batch = append(batch, suppress.Entry{Number: listedNumber(i), Source: suppress.SourceImport, Reason: "STOP", At: at})
		if len(batch) == cap(batch) || i == size-1 {
			if _, err := store.Import(ctx, batch); err != nil {
				return m, fmt.Errorf("import: %w", err)
			}
			batch = batch[:0]
		}
	}
	m.Import = time.Since(start)
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	m.RedisBytes = float64(int64(after)-int64(before)) / float64(size)
	hash, err := rdb.MemoryUsage(ctx, keys.Suppress().List(), 0).Result()
	if err != nil {
		return m, err
	}
	m.HashBytes = float64(hash) / float64(size)

	var b, a runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&b)
	l := suppress.NewList(store, nil)
	start = time.Now()
	if err := l.Load(ctx); err != nil {
		return m, fmt.Errorf("load: %w", err)
	}
	m.Load = time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&a)
	if l.Len() != size {
		return m, fmt.Errorf("a process loaded %d numbers of %d", l.Len(), size)
	}
	m.ProcessBytes = float64(int64(a.HeapAlloc)-int64(b.HeapAlloc)) / float64(size)
	runtime.KeepAlive(l)
	return m, nil
}

// suppressionsAccounts is the demo's account on the simulator at url:
// generic, OTP and marketing, TARGET_RPS 90, MARKETING_RPS 70, BURST 5.
func suppressionsAccounts(ns string) func(primary, _ string) string {
	return func(primary, _ string) string {
		return fmt.Sprintf("accounts:\n  - name: %s-main\n    provider: generic\n    generic: {url: %q, token: %q}\n"+
			"    contract_rps: %d\n    target_rps: %d\n    burst: %d\n    classes: [otp, marketing]\n    class_rps: {marketing: %d}\n",
			ns, primary, simToken, contractRPS, classesTarget, classesBurst, classesMktRPS)
	}
}

// suppressionsTraffic is what a row published: each id's recipient's
// place on the list, and its class.
type suppressionsTraffic struct {
	listed   map[string]bool
	otp, mkt []string
}

// runSuppressionsRow runs one row, the list holding size numbers (0:
// none; the recipients are the same).
func runSuppressionsRow(ctx context.Context, cfg *Config, redisURL string, size int, progress io.Writer) (*suppressionsRow, error) {
	ns, logger := newRun(cfg)
	lg := newEndLog()
	spec := stackSpec{instances: suppressionsInstances, redisURL: redisURL, accountsFile: suppressionsAccounts(ns),
		observer: lg, logger: logger, redisTimeout: cfg.redisTO}
	st, err := startServeStack(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer st.close()
	if err := st.run(ctx, spec); err != nil {
		return nil, err
	}
	if err := st.started(ctx, suppressionsStart); err != nil {
		return nil, err
	}
	statsErr := st.resetCost(ctx)
	start := time.Now()
	tr, err := publishSuppressionsTraffic(ctx, st, cfg.suppressionsOTPRate, max(size, cfg.listSize), ns, lg)
	if err != nil {
		return nil, err
	}
	unended := lg.waitEnded(ctx, append(tr.otp, tr.mkt...), suppressionsDrain)
	fmt.Fprintf(progress, "loadtest: traffic over in %v, %d messages without an end\n", time.Since(start).Round(time.Millisecond), unended)
	st.stop()
	cost := st.readCost(ctx, statsErr)
	ends, nacks := lg.snapshot()
	return measureSuppressions(size, tr, ends, nacks, st.arrivals(), cost), nil
}

// publishSuppressionsTraffic publishes the campaign at once, then OTPs at
// rate until the campaign has ended (every message sent or suppressed), or
// suppressionsTimeout passed; the recipients are recipientOf's of a list
// of size.
func publishSuppressionsTraffic(ctx context.Context, st *serveStack, rate float64, size int, ns string, lg *endLog) (*suppressionsTraffic, error) {
	ctx, cancel := context.WithTimeout(ctx, suppressionsTimeout)
	defer cancel()
	tr := &suppressionsTraffic{listed: map[string]bool{}}
	mkt := st.admin.Publisher(st.cfg.MarketingTopic)
	otp := st.admin.Publisher(st.cfg.OTPTopic)
	defer mkt.Stop()
	defer otp.Stop()
	var results []*pubsub.PublishResult
	n := 0
	add := func(pub *pubsub.Publisher, id, body string, deadline time.Time) {
		to, listed := recipientOf(n, size)
		n++
		tr.listed[id] = listed
		m := map[string]string{"id": id, "to": to, "body": body}
		if !deadline.IsZero() {
			m["deadline"] = deadline.UTC().Format(time.RFC3339)
		}
		results = append(results, publishJSON(ctx, pub, m))
	}
	for i := range suppressionsCampaign {
		id := fmt.Sprintf("%s-m%d", ns, i)
		tr.mkt = append(tr.mkt, id)
		add(mkt, id, "Winter sale: 20% off this weekend", time.Time{})
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for lg.ended(tr.mkt) < len(tr.mkt) {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the campaign did not end: %w", ctx.Err())
		case <-tick.C:
		}
		id := fmt.Sprintf("%s-o%d", ns, len(tr.otp))
		tr.otp = append(tr.otp, id)
		add(otp, id, "Your code is 482913", time.Now().Add(classesOTPLife))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	return tr, nil
}
