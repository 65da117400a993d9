package loadharness

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/provider/providertest"
)

// Strategies, in the order they are run and reported.
const (
	stratV1    = "v1"    // static split, LIMIT_PER_POD = 100/2, local window
	stratV2    = "v2"    // GET-then-INCR on the pod's clock, fail open, spin, 429 x4
	stratPlanA = "planA" // one INCR, same window, same loop
	stratGCRA  = "gcra"  // admission.Limiter and the dispatcher's nack policy
)

var allStrategies = []string{stratV1, stratV2, stratPlanA, stratGCRA}

// The provider's contract, as docs/contract.md section 3 states it, and the real limiter's
// defaults.
const (
	targetRPS        = admission.DefaultTargetRPS    // the default of --target-rps
	marketingRPS     = admission.DefaultMarketingRPS // the default of --marketing-rps
	contractRPS      = 100
	suspendAfter429s = 300
	suspendWindow    = 10 * time.Minute
)

// A mode is one way the provider may measure its 100 messages per second.
type mode struct {
	name string
	sim  providertest.Config
}

// modes are the provider's measurement modes. None suspends the account:
// the report extrapolates the suspension from the 429 rate instead, so a run
// keeps measuring after the point where the real account would stop.
var modes = []mode{
	{"sliding1s", providertest.Config{Limit: 100, Window: time.Second}},
	{"fixed1s", providertest.Config{Limit: 100, Window: time.Second, Fixed: true}},
	{"fixed1s-0.37", providertest.Config{Limit: 100, Window: time.Second, Fixed: true, Phase: 370 * time.Millisecond}},
	{"sliding100ms", providertest.Config{Limit: 10, Window: 100 * time.Millisecond}},
}

func init() {
	for i := range modes {
		modes[i].sim.SuspendAfter = -1
		modes[i].sim.RetryAfter = time.Second
		modes[i].sim.Token = simToken
	}
}

func modeNames() []string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.name
	}
	return names
}

func modeByName(name string) (mode, bool) {
	for _, m := range modes {
		if m.name == name {
			return m, true
		}
	}
	return mode{}, false
}

// Config is one command line of loadtest or soak, validated: the
// settings of every run. ParseMatrix and ParseSoak fill it; its fields are
// the harness's own.
type Config struct {
	redisURL   string
	duration   time.Duration
	senders    []int
	strategies []string
	modes      []string
	skew       time.Duration
	otpRate    float64
	// target and marketing are gcra's TARGET_RPS and MARKETING_RPS.
	target, marketing float64
	mktWorkers        int
	otpWorkers        int
	burst             int // gcra BURST in modes counting 1 s
	burst100ms        int // gcra BURST in modes counting 100 ms
	maxSenders        int
	redelivery        time.Duration
	latency           time.Duration
	jitter            time.Duration // --arrival-jitter: the most a request is held before the provider sees it
	redisTO           time.Duration
	faults            []fault
	jsonFile          string
	svgFile           string
	svgMode           string
	svgSenders        int
	verbose           bool
	quick             bool
	soak              time.Duration // soak: the length of the soak
	soakCSV           string
	soakEvery         time.Duration // soak sampling interval: soakInterval, shorter in tests
	segments          int           // segments of every body; above 1 the provider counts segments
	rateUnit          string        // what gcra's rates count: segment or message
	// scenarios are the rows of --scenario, run instead of the matrix,
	// each with its settings resolved (scenario.go).
	scenarios      []scenario
	adaptiveStep   time.Duration // --adaptive-step: Adaptive.Step of the adaptive scenario
	providerJitter time.Duration // --provider-arrival-jitter: the limiter's ArrivalJitter in the senders scenario
	pool           int           // --pool: the senders scenario's pool size
	// codes are the code rows of failover and classes (--code).
	codes []string
	// failover is set when --scenario names failover, whose rows run
	// apart from scenarios (failover.go): each of codes with each of
	// failoverStorms, a storm of stormLength, SEND_TIMEOUT sendTimeout,
	// OTP at failoverOTPRate.
	failover        bool
	failoverStorms  []string
	stormLength     time.Duration
	sendTimeout     time.Duration
	failoverOTPRate float64
	// receipts is set when --scenario names receipts, whose row runs apart
	// (receipts.go): receiptRate receipts a second for receiptsDuration.
	receipts         bool
	receiptRate      float64
	receiptsDuration time.Duration
	// statusOutage is how long the status topic refuses publishes, from
	// the receipts phase's middle (0: never).
	statusOutage time.Duration
	// classes is set when --scenario names classes, whose rows (one per
	// code) run apart (classes.go): classesDuration long, OTP at
	// classesOTPRate.
	classes         bool
	classesDuration time.Duration
	classesOTPRate  float64
	// backlogRun is set when --scenario names backlog, whose rows (one per
	// code) run apart (backlog.go): backlogDuration long, OTP at
	// backlogOTPRate.
	backlogRun      bool
	backlogDuration time.Duration
	backlogOTPRate  float64
	// accountsRun is set when --scenario names accounts, whose rows (one
	// process per size of accounts, --accounts) run apart (accounts.go).
	accountsRun  bool
	accounts     []int
	accountsList string
	// suppressionsRun is set when --scenario names suppressions, whose
	// two rows run apart (suppressions.go): a list of listSize numbers,
	// OTP at suppressionsOTPRate.
	suppressionsRun     bool
	listSize            int
	suppressionsOTPRate float64
	// pumpingRun is set when --scenario names pumping, whose rows run
	// apart (pumping.go).
	pumpingRun bool
	pumping    pumpingSettings
	// deferredRun is set when --scenario names deferred, whose rows
	// (deferredSpecs: --release-spread × --code) run apart (deferred.go).
	deferredRun        bool
	deferredMessages   int
	deferredSpreadList string
	deferredSpecs      []deferredSpec
}

// defaults of the flags; --quick changes the first three unless given.
const (
	defDuration   = 5 * time.Second
	defSenders    = "2,16,23"
	quickDuration = 2 * time.Second
	quickSenders  = "2,16"
	quickModes    = "sliding1s,sliding100ms"
	soakSenders   = 23
	soakMode      = "sliding1s"
)

// ParseMatrix reads the command line of loadtest: the matrix of
// strategies, modes and K, or with --scenario the scenarios' rows. It
// returns flag.ErrHelp after printing the usage for -h.
func ParseMatrix(args []string, stderr io.Writer) (*Config, error) {
	return parseFlags("loadtest", args, stderr)
}

// ParseSoak reads the command line of soak: --soak DURATION and the flags
// of the senders, K (23) and the mode (sliding1s) unless given.
func ParseSoak(args []string, stderr io.Writer) (*Config, error) {
	return parseFlags("soak", args, stderr)
}

// parseFlags reads the command line of program (loadtest or soak): the
// flags both take, and each program's own.
func parseFlags(program string, args []string, stderr io.Writer) (*Config, error) {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &Config{duration: defDuration, segments: 1, rateUnit: "segment", pool: poolSenders}
	var senders, strategies, modesFlag, scenarios, codes, storms string
	fs.StringVar(&c.redisURL, "redis-url", os.Getenv("REDIS_URL"),
		"redis:// URL of a Redis to use [REDIS_URL]; if empty, start redis-server from PATH on a free loopback port")
	fs.StringVar(&senders, "senders", defSenders, "comma list of K, the number of concurrent senders (pods)")
	fs.StringVar(&modesFlag, "modes", strings.Join(modeNames(), ","), "comma list of provider modes: "+strings.Join(modeNames(), ", "))
	fs.DurationVar(&c.skew, "skew", 300*time.Millisecond, "clock spread: sender i of K runs (i/(K-1) - 0.5) x skew off true time (old strategies' windows)")
	fs.Float64Var(&c.otpRate, "otp-rate", 10, "OTP messages per second, all senders together")
	fs.IntVar(&c.mktWorkers, "marketing-workers", 4, "workers per sender that take OTP first, else marketing")
	fs.IntVar(&c.otpWorkers, "otp-workers", 2, "workers per sender that take OTP only")
	fs.Float64Var(&c.target, "target-rps", targetRPS, "gcra TARGET_RPS (the contract stays 100/s)")
	fs.Float64Var(&c.marketing, "marketing-rps", marketingRPS, "gcra MARKETING_RPS")
	fs.IntVar(&c.burst, "burst", admission.DefaultBurst, "gcra BURST in the modes that count per second")
	fs.IntVar(&c.burst100ms, "burst-100ms", 1, "gcra BURST in the modes that count per 100 ms")
	fs.IntVar(&c.maxSenders, "max-senders", admission.DefaultMaxSenders, "gcra MAX_SENDERS (raised to K when K is larger)")
	fs.DurationVar(&c.redelivery, "redelivery-delay", 100*time.Millisecond, "gcra: how long a nacked message takes to come back, as Pub/Sub redelivery")
	fs.DurationVar(&c.latency, "provider-latency", 0, "time the simulated provider takes to answer each request (0: loopback speed; real providers take tens of ms, which spreads the old strategies' bursts)")
	fs.DurationVar(&c.redisTO, "redis-timeout", admission.DefaultRedisTimeout, "gcra REDIS_TIMEOUT: a script call slower than this falls back to the local share for a second")
	fs.BoolVar(&c.verbose, "verbose", false, "log the real limiter's Redis fallback lines to stderr")
	soak := program == "soak"
	if soak {
		fs.DurationVar(&c.soak, "soak", 0, fmt.Sprintf("run K sender processes with gcra at full rate for this long (K=%d and mode %s unless given), "+
			"sample them and Redis every %v, and fail if any series grows more than %.0f%% from minute 2 (halfway if shorter than 4m) to the end, or on any 429", soakSenders, soakMode, soakInterval, soakMaxGrowth*100))
		fs.StringVar(&c.soakCSV, "soak-csv", "", "write every sample to this CSV file")
	} else {
		fs.DurationVar(&c.duration, "duration", defDuration, fmt.Sprintf("length of each run (with --scenario: %v for senders, %v for adaptive, %v of receipts for receipts, %v of traffic for classes, %v for backlog)", poolDuration, adaptiveDuration, receiptsDuration, classesDuration, backlogDuration))
		fs.StringVar(&strategies, "strategies", strings.Join(allStrategies, ","), "comma list of strategies: "+strings.Join(allStrategies, ", "))
		fs.DurationVar(&c.jitter, "arrival-jitter", 0, "hold each request a uniform random time in [0, D] in front of the simulated provider, so that it sees arrivals spread as PROVIDER_ARRIVAL_JITTER D allows for (0: none)")
		fs.Func("fault", "inject a fault, KIND@START+LENGTH, may repeat: redis-down@2s+1.5s, 429@2s+0.5s, 5xx@2s+1s", func(s string) error {
			f, err := parseFault(s)
			if err == nil {
				c.faults = append(c.faults, f)
			}
			return err
		})
		fs.StringVar(&c.jsonFile, "json", "", "write every row and its per-100ms arrival histogram to this file")
		fs.StringVar(&c.svgFile, "svg", "", "write a chart of arrivals per 100 ms, one panel per strategy, to this file")
		fs.StringVar(&c.svgMode, "svg-mode", "sliding1s", "provider mode the chart shows")
		fs.IntVar(&c.svgSenders, "svg-senders", 16, "K the chart shows")
		fs.IntVar(&c.segments, "segments", 1, "segments of every body (GSM-7); above 1 the simulated provider counts segments, as Twilio does")
		fs.StringVar(&c.rateUnit, "rate-unit", "segment", "what gcra's rates count with --segments: segment (RATE_UNIT=segment), or message to show what counting messages does")
		fs.BoolVar(&c.quick, "quick", false, "smoke run: "+quickDuration.String()+" runs, K="+quickSenders+", modes "+quickModes+" (flags given explicitly win)")
		fs.StringVar(&scenarios, "scenario", "", "instead of the matrix, run these rows with gcra (comma list): "+
			fmt.Sprintf("%s (one account counting segments at %d/s, a pool of %d senders at %d/s each, bodies of 1-%d segments (--segments); %v), ", scenSenders, poolAccountLimit, poolSenders, poolSenderLimit, poolMaxSegments, poolDuration)+
			fmt.Sprintf("%s (a provider allowing %d/s where TARGET_RPS is %d, the learned rate on; %v, fails unless at most %d 429s, none in the last %v, and at least %.0f%% of %d/s sent over them)",
				scenAdaptive, adaptiveLimit, adaptiveTarget, adaptiveDuration, adaptiveMax429s, adaptiveTail, adaptiveMinShare*100, adaptiveLimit)+
			fmt.Sprintf(", %s (the real dispatcher, %d processes, an OTP and marketing account and an OTP backup; the first fails for --storm-length after %v; rows --code × --storm, about %v each; fails when an after row misses its criterion)",
				scenFailover, failoverInstances, failoverWarmup, failoverWarmup+failoverStorm+failoverAfter+10*time.Second)+
			fmt.Sprintf(", %s (%d dispatchers, each with its receipts server, three accounts (generic, Twilio, Vonage): a marketing backlog sent, then its receipts posted at --receipt-rate for --duration (%v), duplicated, replayed, out of order and some forged; fails when a final state is lost, a forged receipt accepted, a final has no status event at the stop or their p99 passes %v after the receipt, or a receipt costs more than %.2f Redis calls)",
				scenReceipts, receiptsInstances, receiptsDuration, receiptsMaxEventLag, receiptsMaxCalls)+
			fmt.Sprintf(", %s (the real dispatcher, %d processes, one account at TARGET_RPS %d: a marketing backlog of %d, transactional %g/s and OTP %g/s for --duration (%v); rows --code: before (today's two classes, transactional published to marketing), after (three classes); fails when the after row has a 429, transactional p99 above %v, OTP p99 above %v or marketing off its rate by more than %.0f%%)",
				scenClasses, classesInstances, classesTarget, classesBacklog, classesTrxRate, classesOTPRate, classesDuration, classesMaxTrxP99, classesMaxOTPP99, classesMktTolerance*100)+
			fmt.Sprintf(", %s (the real dispatcher, %d processes, one account at TARGET_RPS %d, MARKETING_RPS %d, the learned rate on, a provider allowing %d/s: a marketing backlog of %d, then OTP %g/s for --duration (%v); rows --code: before (the Pub/Sub clients ping every pull stream, which stalls pstest every 30 s), after (as the dispatcher does); fails when the after row leaves an OTP unsent or its OTP p99 clear of a 429's Retry-After is above %v)",
				scenBacklog, backlogInstances, classesTarget, classesMktRPS, backlogLimit, classesBacklog, backlogOTPRate, backlogDuration, backlogMaxOTPP99)+
			fmt.Sprintf(", %s (one dispatcher process per size of --accounts, each account one destination prefix, OTP %g/s over them for --duration (%v): its memory, goroutines, Redis connections, heartbeats and other calls a second not for a message, and status's read; fails above %g heartbeat or %g such calls a second (and one more of each its window may catch), or when the largest size's memory or connections pass %gx the smallest's)",
				scenAccounts, accountsOTPRate, accountsDuration, accountsMaxBeats, accountsMaxOwn, accountsMaxRSS)+
			fmt.Sprintf(", %s (the real dispatcher as serve wires it, %d processes: the demo's campaign of %d and OTP %g/s, 1 recipient in %d on the list, without a list then with --list-size numbers imported; Redis and process memory per number; fails when a listed number is sent or not suppressed, or above %.2f script calls a sent message)",
				scenSuppressions, suppressionsInstances, suppressionsCampaign, suppressionsOTPRate, suppressEvery, suppressionsMaxScripts)+
			fmt.Sprintf(", %s (the real dispatcher as serve wires it, %d processes, an OTP account and its backup failing over: legitimate OTP %g/s to many ranges, 80%% verified, and an attack of --attack-rate to two ranges, none verified; rows: the guard off, on (max_per_prefix), on against a slow attack (min_conversion, grace --guard-grace); fails when an attack range is not blocked by its row's rule, gets more than count + %d sends (on) or min_sends + %d OTPs or more (slow), or a legitimate OTP is blocked)",
				scenPumping, pumpingInstances, pumpingLegitRate, pumpingSlack, pumpingSlack)+
			deferredUsage()+
			fmt.Sprintf("; K=%d and OTP %g/s unless given (failover: OTP %g/s, classes: %g/s)", scenarioK, scenarioOTPRate, failoverOTPRate, classesOTPRate))
		fs.DurationVar(&c.adaptiveStep, "adaptive-step", admission.DefaultAdaptiveStep, "with --scenario adaptive, the learned rate's Adaptive.Step: how long a rate holds under load before the search moves on")
		fs.IntVar(&c.pool, "pool", poolSenders, fmt.Sprintf("with --scenario senders, the senders in the account's pool (1 to %d), each of %d segments per sliding second", admission.MaxPoolSize, poolSenderLimit))
		fs.DurationVar(&c.providerJitter, "provider-arrival-jitter", poolJitter, "with --scenario senders, the limiter's ArrivalJitter (PROVIDER_ARRIVAL_JITTER): each sender's slots are spaced by (1s + this) / its rate")
		fs.StringVar(&codes, "code", strings.Join(allCodes, ","), "with --scenario failover, classes, backlog or deferred, the rows' code (comma list): before (failover: the account health rule off, as the dispatcher was before it; classes: today's two classes; backlog: every pull stream pinged; deferred: a remove call per released message), after (failover: its defaults; classes: three classes; backlog: as the dispatcher does; deferred: a page removed per call)")
		fs.StringVar(&storms, "storm", strings.Join(allStorms, ","), "with --scenario failover, how the primary fails (comma list): 503 (every request answered 503), hang (a request answered 503 after 12 s)")
		fs.DurationVar(&c.stormLength, "storm-length", failoverStorm, "with --scenario failover, how long the primary fails")
		fs.DurationVar(&c.sendTimeout, "send-timeout", failoverSendTimeout, "with --scenario failover, the dispatchers' SEND_TIMEOUT")
		fs.Float64Var(&c.receiptRate, "receipt-rate", receiptsRate, "with --scenario receipts, the receipts the simulators post per second")
		fs.DurationVar(&c.statusOutage, "status-outage", 0, "with --scenario receipts, how long the status topic refuses every publish (PermissionDenied), from the middle of the receipts")
		fs.StringVar(&c.accountsList, "accounts", accountsDefault, "with --scenario accounts, the accounts of each row's process (comma list)")
		fs.IntVar(&c.listSize, "list-size", suppressionsListSize, "with --scenario suppressions, the numbers imported on the suppression list")
		pumpingFlags(fs, &c.pumping)
		addDeferredFlags(fs, c)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if soak {
		if !set["senders"] {
			senders = strconv.Itoa(soakSenders)
		}
		if !set["modes"] {
			modesFlag = soakMode
		}
		strategies = stratGCRA
		c.soakEvery = soakInterval
	}
	if scenarios != "" {
		for _, name := range scenarioExcludes {
			if set[name] {
				return nil, fmt.Errorf("--%s does not apply to --scenario", name)
			}
		}
		if !set["senders"] {
			senders = strconv.Itoa(scenarioK)
		}
		if !set["marketing-rps"] {
			c.marketing = c.target // each scenario's default: MARKETING_RPS = TARGET_RPS
		}
	} else {
		for _, name := range slices.Concat([]string{"adaptive-step", "provider-arrival-jitter", "accounts"}, failoverFlags, receiptsFlags, deferredFlags) {
			if set[name] {
				return nil, fmt.Errorf("--%s needs --scenario", name)
			}
		}
		for _, name := range append([]string{"list-size"}, pumpingOwnFlags...) {
			if set[name] {
				return nil, fmt.Errorf("--%s needs --scenario", name)
			}
		}
	}
	if c.quick {
		if !set["duration"] {
			c.duration = quickDuration
		}
		if !set["senders"] {
			senders = quickSenders
		}
		if !set["modes"] {
			modesFlag = quickModes
		}
	}

	var err error
	if !soak {
		if c.codes, err = parseNames(codes, allCodes); err != nil {
			return nil, fmt.Errorf("--code: %w", err)
		}
		if c.failoverStorms, err = parseNames(storms, allStorms); err != nil {
			return nil, fmt.Errorf("--storm: %w", err)
		}
	}
	if c.senders, err = parseInts(senders); err != nil {
		return nil, fmt.Errorf("--senders: %w", err)
	}
	if c.strategies, err = parseNames(strategies, allStrategies); err != nil {
		return nil, fmt.Errorf("--strategies: %w", err)
	}
	if c.modes, err = parseNames(modesFlag, modeNames()); err != nil {
		return nil, fmt.Errorf("--modes: %w", err)
	}
	switch {
	case c.duration < 100*time.Millisecond:
		return nil, fmt.Errorf("--duration must be at least 100ms, got %v", c.duration)
	case c.skew < 0:
		return nil, fmt.Errorf("--skew must not be negative, got %v", c.skew)
	case !(c.otpRate >= 0) || c.otpRate > 10000:
		return nil, fmt.Errorf("--otp-rate must be in [0, 10000], got %v", c.otpRate)
	case c.mktWorkers < 1 || c.otpWorkers < 0:
		return nil, fmt.Errorf("--marketing-workers must be at least 1 and --otp-workers at least 0")
	case !(c.target >= admission.MinRPS) || c.target > contractRPS:
		return nil, fmt.Errorf("--target-rps must be in [%v, %d], got %v", admission.MinRPS, contractRPS, c.target)
	case !(c.marketing >= admission.MinRPS) || c.marketing > c.target:
		return nil, fmt.Errorf("--marketing-rps must be in [%v, --target-rps], got %v", admission.MinRPS, c.marketing)
	case c.burst < 1 || c.burst100ms < 1:
		return nil, fmt.Errorf("--burst and --burst-100ms must be at least 1")
	case c.maxSenders < 1:
		return nil, fmt.Errorf("--max-senders must be at least 1, got %d", c.maxSenders)
	case c.redelivery < 0:
		return nil, fmt.Errorf("--redelivery-delay must not be negative, got %v", c.redelivery)
	case c.redisTO <= 0:
		return nil, fmt.Errorf("--redis-timeout must be positive, got %v", c.redisTO)
	case c.latency < 0 || c.latency >= sendTimeout:
		return nil, fmt.Errorf("--provider-latency must be in [0, %v), got %v", sendTimeout, c.latency)
	case c.jitter < 0 || c.latency+c.jitter >= sendTimeout:
		return nil, fmt.Errorf("--arrival-jitter must be 0 or more, and with --provider-latency less than the send timeout %v, got %v", sendTimeout, c.jitter)
	case c.segments < 1 || c.segments > 10:
		return nil, fmt.Errorf("--segments must be in [1, 10], got %d", c.segments)
	case c.rateUnit != "segment" && c.rateUnit != "message":
		return nil, fmt.Errorf("--rate-unit must be segment or message, got %q", c.rateUnit)
	}
	if soak {
		switch {
		case c.soak < 2*c.soakEvery:
			return nil, fmt.Errorf("--soak must be at least %v (two samples), got %v", 2*c.soakEvery, c.soak)
		case len(c.senders) != 1:
			return nil, fmt.Errorf("--soak takes one K in --senders, got %v", c.senders)
		case len(c.modes) != 1:
			return nil, fmt.Errorf("--soak takes one mode in --modes, got %v", c.modes)
		}
	}
	if scenarios != "" {
		if c.scenarios, err = resolveScenarios(c, scenarios, set); err != nil {
			return nil, err
		}
	}
	for _, f := range c.faults {
		if f.at >= c.duration {
			return nil, fmt.Errorf("--fault %s starts after the run ends (--duration %v)", f, c.duration)
		}
	}
	if c.svgFile != "" {
		if !slices.Contains(c.modes, c.svgMode) || !slices.Contains(c.senders, c.svgSenders) {
			return nil, fmt.Errorf("--svg shows mode %q with K=%d, which this run does not include (set --svg-mode and --svg-senders)", c.svgMode, c.svgSenders)
		}
	}
	return c, nil
}

// burstFor returns the gcra BURST for m: BURST 1 fits a provider counting
// per 100 ms (10 per window), BURST 5 one counting per second.
func (c *Config) burstFor(m mode) int {
	if m.sim.Window < time.Second {
		return c.burst100ms
	}
	return c.burst
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("%q is not a number from 1 to 1000", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseNames returns the names of s that are in known, in known's order.
func parseNames(s string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown name %q (want some of %s)", f, strings.Join(known, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// Fault kinds.
const (
	faultRedisDown = "redis-down" // senders cannot connect to Redis
	fault429       = "429"        // the provider answers 429 to everything
	fault5xx       = "5xx"        // the provider answers 503 to everything
)

// A fault is one span of trouble in every run, timed from the run's start.
type fault struct {
	kind string
	at   time.Duration
	dur  time.Duration
}

func (f fault) String() string { return fmt.Sprintf("%s@%v+%v", f.kind, f.at, f.dur) }

// parseFault reads KIND@START+LENGTH, such as redis-down@2s+1.5s.
func parseFault(s string) (fault, error) {
	kind, rest, ok := strings.Cut(s, "@")
	at, length, ok2 := strings.Cut(rest, "+")
	if !ok || !ok2 {
		return fault{}, fmt.Errorf("%q: want KIND@START+LENGTH, e.g. redis-down@2s+1.5s", s)
	}
	switch kind {
	case faultRedisDown, fault429, fault5xx:
	default:
		return fault{}, fmt.Errorf("%q: unknown kind %q (want %s, %s or %s)", s, kind, faultRedisDown, fault429, fault5xx)
	}
	f := fault{kind: kind}
	var err error
	if f.at, err = time.ParseDuration(at); err != nil || f.at < 0 {
		return fault{}, fmt.Errorf("%q: start %q is not a duration of 0 or more", s, at)
	}
	if f.dur, err = time.ParseDuration(length); err != nil || f.dur <= 0 {
		return fault{}, fmt.Errorf("%q: length %q is not a positive duration", s, length)
	}
	return f, nil
}
