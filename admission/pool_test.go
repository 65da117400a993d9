package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestASenderOfThePoolNeverExceedsItsRate runs random sequences of
// The admission script calls on an account with a sender pool, on an injected clock,
// and asserts that no sender's sends (a send of cost c is c units at its
// slot) hold more than its rate in any window of 1 s + the arrival jitter:
// the provider, seeing each send up to the jitter later, never sees more
// than the sender's rate in a second. Costs go up to the slowest sender's
// rate (a longer message than that goes alone, and is not drawn here).
// Each admission takes the sender whose slot opens first, checked against
// a model of every sender's TAT. The last sequences have pools of 1,000
// and 10,000 senders of two rates, pressed for longer than a second.
func TestASenderOfThePoolNeverExceedsItsRate(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	rng := rand.New(rand.NewPCG(propertySeed, 7))
	ctx := context.Background()
	full := 0 // windows a sender filled: the test pressed against the limits
	for seq := range 42 {
		var senders []Sender
		n, rates, calls, step := 1+rng.IntN(5), []float64{1, 3, 3, 10, 30}, 300, int64(20_000)
		switch seq {
		case 40:
			n, rates, calls, step = 1_000, []float64{1, 3}, 4_000, 1_000
		case 41:
			n, rates, calls, step = MaxPoolSize, []float64{1, 3}, 24_000, 100
		}
		for i := range n {
			senders = append(senders, Sender{From: fmt.Sprint("+1555", 1_000_000+i), RPS: rates[rng.IntN(len(rates))]})
		}
		maxCost := 1
		for c := 3; c > 1; c-- {
			if slices.IndexFunc(senders, func(s Sender) bool { return s.RPS < float64(c) }) < 0 {
				maxCost = c
				break
			}
		}
		cfg := Config{
			Account: redistest.UniqueAccount(t), TargetRPS: 1e5, MarketingRPS: 1e5, Burst: 1 + rng.IntN(5),
			Senders: senders, ArrivalJitter: time.Duration(rng.IntN(2)) * 20 * time.Millisecond,
		}
		if seq < 40 {
			cfg.TargetRPS, cfg.MarketingRPS = 1000, 1000
		}
		rec := &recorder{}
		l := newLimiter(t, rec, cfg)
		if err := l.pool.build(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		type call struct {
			at, lookahead int64
			cost          int
		}
		var plan []call
		at := t0.UnixMicro()
		for range calls {
			at += rng.Int64N(step)
			plan = append(plan, call{at: at, lookahead: rng.Int64N(400_000), cost: 1 + rng.IntN(maxCost)})
		}
		// In pipelines of 1,000 calls: one of 24,000 would outlast the
		// client's write timeout on a loaded machine.
		cmds := make([]*redis.Cmd, len(plan))
		for first := 0; first < len(plan); first += 1_000 {
			scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
				for i := first; i < min(first+1_000, len(plan)); i++ {
					g, _ := gcraCall(t, l, rec, bothClasses[rng.IntN(2)], false, ticketOnDenial, time.Hour, 0, Claim{})
					*g.admitArg(t, 14) = strconv.Itoa(plan[i].cost)
					*g.admitArg(t, 15) = strconv.FormatInt(plan[i].lookahead, 10)
					cmds[i] = scripts.send(ctx, p, g, plan[i].at)
				}
			})
		}
		index := map[string]int{}
		interval := make([]int64, len(senders))
		for i, s := range senders {
			index[s.From], interval[i] = i, senderInterval(s.RPS, cfg.ArrivalJitter).Microseconds()
		}
		tat := make([]int64, len(senders)) // the model: each sender's TAT
		units := map[string][]int64{}      // sender -> unit instants
		admitted := 0
		for i, cmd := range cmds {
			v, err := cmd.Slice()
			if err != nil {
				t.Fatalf("sequence %d call %d: %v", seq, i, err)
			}
			d, err := parseDecision(v)
			if err != nil {
				t.Fatalf("sequence %d call %d: %v", seq, i, err)
			}
			pick := v[6].(string)
			if !d.Allowed {
				if pick != "" {
					t.Fatalf("sequence %d call %d: a denial took sender %s", seq, i, pick)
				}
				continue
			}
			k, ok := index[pick]
			if !ok {
				t.Fatalf("sequence %d call %d: allowed with sender %q, not in the pool", seq, i, pick)
			}
			// The sender whose slot opens first: none opens earlier.
			c := int64(plan[i].cost)
			for j := range senders {
				if tat[j]+(c-1)*interval[j] < tat[k]+(c-1)*interval[k] {
					t.Fatalf("sequence %d call %d: took %s (opens at %dµs), but %s opens at %dµs",
						seq, i, pick, tat[k]+(c-1)*interval[k], senders[j].From, tat[j]+(c-1)*interval[j])
				}
			}
			slot := plan[i].at + d.RetryAfter.Microseconds()
			tat[k] = max(tat[k], slot) + c*interval[k]
			admitted++
			for range c {
				units[pick] = append(units[pick], slot)
			}
		}
		if admitted == 0 {
			t.Fatalf("sequence %d: nothing admitted", seq)
		}
		full += fullWindows(t, fmt.Sprintf("sequence %d (%d senders)", seq, n), cfg, units)
	}
	if full < 100 {
		t.Fatalf("only %d windows held a sender's whole rate: the sequences do not press against the pool", full)
	}
}

// fullWindows fails t if a sender's units hold more than its rate in any
// window of 1 s + the arrival jitter, and returns how many windows held
// exactly its rate.
func fullWindows(t *testing.T, what string, cfg Config, units map[string][]int64) int {
	t.Helper()
	rps := map[string]float64{}
	for _, s := range cfg.Senders {
		rps[s.From] = s.RPS
	}
	w := time.Second.Microseconds() + cfg.ArrivalJitter.Microseconds()
	full := 0
	for from, u := range units {
		slices.Sort(u)
		for i := range u {
			j, _ := slices.BinarySearch(u, u[i]+w) // first instant outside [u[i], u[i]+w)
			n := j - i
			if float64(n) >= rps[from] {
				full++
			}
			if float64(n) > rps[from] {
				t.Fatalf("%s: sender %s had %d units in [%d, %d+%dµs), above its %v/s", what, from, n, u[i], u[i], w, rps[from])
			}
		}
	}
	return full
}

// TestTwoPoolConfigurationsKeepEachSenderWithinItsRate: during a rolling
// deploy two configurations of an account's pool send at once, each
// through its own index, sharing some senders. Each sender's TAT key is
// the truth both write: no shared sender goes above its rate, whichever
// configuration took it.
func TestTwoPoolConfigurationsKeepEachSenderWithinItsRate(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	rng := rand.New(rand.NewPCG(propertySeed, 11))
	ctx := context.Background()
	account := redistest.UniqueAccount(t)
	var all []Sender
	for i := range 30 {
		all = append(all, Sender{From: fmt.Sprint("+1555", 2_000_000+i), RPS: 5})
	}
	// Two configurations: the first 20 senders, and the last 20 (10 shared).
	var ls []*Limiter
	var recs []*recorder
	for _, pool := range [][]Sender{all[:20], all[10:]} {
		cfg := Config{Account: account, TargetRPS: 1000, MarketingRPS: 1000, Burst: 3, Senders: pool}
		rec := &recorder{}
		l := newLimiter(t, rec, cfg)
		if err := l.pool.build(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		ls, recs = append(ls, l), append(recs, rec)
	}
	if ls[0].pool.indexes[0] == ls[1].pool.indexes[0] {
		t.Fatalf("two configurations share the index %s", ls[0].pool.indexes[0])
	}
	ats := make([]int64, 2_000)
	at := t0.UnixMicro()
	for i := range ats {
		at += rng.Int64N(2_000)
		ats[i] = at
	}
	cmds := make([]*redis.Cmd, len(ats))
	scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
		for i, at := range ats {
			k := rng.IntN(2)
			g, _ := gcraCall(t, ls[k], recs[k], Marketing, false, ticketNone, time.Hour, 0, Claim{})
			cmds[i] = scripts.send(ctx, p, g, at)
		}
	})
	units := map[string][]int64{}
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		d, err := parseDecision(v)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if d.Allowed {
			units[v[6].(string)] = append(units[v[6].(string)], ats[i]+d.RetryAfter.Microseconds())
		}
	}
	cfg := Config{Senders: all}
	if full := fullWindows(t, "two configurations", cfg, units); full < 100 {
		t.Fatalf("only %d windows held a sender's whole rate: the calls do not press against the pool", full)
	}
	for _, s := range all[10:20] {
		if len(units[s.From]) == 0 {
			t.Fatalf("shared sender %s never taken", s.From)
		}
	}
}

// TestThePoolTakesTheSenderWhoseSlotOpensFirst: the first free sender is
// taken, then the next; with none free the denial names the sender pool
// and the wait until the first one opens.
func TestThePoolTakesTheSenderWhoseSlotOpensFirst(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS = 1000, 1000
	cfg.Senders = []Sender{{From: "+15550000001", RPS: 0.5}, {From: "+15550000002", RPS: 2}}
	l := newLimiter(t, rdb, cfg)
	for i, want := range []string{"+15550000002", "+15550000001"} { // both free: the faster first
		if d := try(t, l, OTP); !d.Allowed || d.Sender != want {
			t.Fatalf("admission %d: %+v, want allowed from %s", i+1, d, want)
		}
	}
	d := try(t, l, Marketing)
	if d.Allowed || d.Reason != ReasonSender || d.RetryAfter <= 0 || d.RetryAfter > 500*time.Millisecond {
		t.Fatalf("third admission: %+v, want denied by the sender pool for at most 500ms (the 2/s sender's slot)", d)
	}
	dd, err := l.Admit(context.Background(), OTP, 1, time.Second, Claim{})
	if err != nil || !dd.Allowed || dd.Sender != "+15550000002" {
		t.Fatalf("waiting admission: %+v, %v; want the 2/s sender once it opens", dd, err)
	}
}

// TestTheFallbackSharesEachSenderAmongTheProcesses: while Redis is down a
// process sends from each sender at most its rate over MaxSenders.
func TestTheFallbackSharesEachSenderAmongTheProcesses(t *testing.T) {
	cfg := Config{TargetRPS: 1000, MarketingRPS: 1000, MaxSenders: 4, Senders: []Sender{{From: "a", RPS: 2}, {From: "b", RPS: 4}}}
	f := newFallback(cfg.withDefaults())
	now := t0
	var got []string
	for i := range 3 {
		d := f.decideClass(now.Add(time.Duration(i)*5*time.Millisecond), OTP)
		if !d.Allowed {
			got = append(got, "denied:"+string(d.Reason))
			continue
		}
		got = append(got, d.Sender)
	}
	// a: one per 2 s per process; b: one per second.
	if fmt.Sprint(got) != "[a b denied:sender]" {
		t.Fatalf("fallback 5ms apart: %v, want [a b denied:sender]", got)
	}
	if d := f.decideClass(now.Add(time.Second+10*time.Millisecond), OTP); !d.Allowed || d.Sender != "b" {
		t.Fatalf("a second later: %+v, want b (a opens after 2 s)", d)
	}
}

// TestALostPoolIndexIsBuiltAgain: an admission that finds the pool's index
// gone (Redis restarted empty of it, or its day over) builds it again from
// the senders' TATs and decides: no error reaches the caller, no sender
// sends early, and the index lives a day.
func TestALostPoolIndexIsBuiltAgain(t *testing.T) {
	rdb := redistest.Client(t)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS = 1000, 1000
	cfg.Senders = []Sender{{From: "+15550000001", RPS: 1}, {From: "+15550000002", RPS: 1}}
	l := newLimiter(t, rdb, cfg)
	for range 2 {
		if d := try(t, l, OTP); !d.Allowed {
			t.Fatalf("admission: %+v, want allowed", d)
		}
	}
	ctx := context.Background()
	index := l.pool.indexes[0]
	if err := rdb.Del(ctx, index).Err(); err != nil {
		t.Fatal(err)
	}
	if d := try(t, l, OTP); d.Allowed || d.Reason != ReasonSender {
		t.Fatalf("with the index lost: %+v, want denied by the pool (both senders took their slot)", d)
	}
	// Built from the TATs, not from nothing (which admissions would mend
	// a few senders a call).
	if err := rdb.Del(ctx, index).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.pool.build(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Senders {
		score, err := rdb.ZScore(ctx, index, s.From).Result()
		if err != nil {
			t.Fatalf("index %s: %v", s.From, err)
		}
		if tat := get(t, rdb, l.pool.floor+s.From); strconv.FormatFloat(score, 'f', -1, 64) != tat {
			t.Errorf("%s scored %v in the rebuilt index, its TAT is %s", s.From, score, tat)
		}
	}
	if ttl := rdb.PTTL(ctx, index).Val(); ttl <= 0 || ttl > poolIndexTTL {
		t.Errorf("index lives %v, want up to %v", ttl, poolIndexTTL)
	}
}

// A sender's TAT key lives a second past the TAT it holds, as the other
// TATs written with a lifetime do: the key of a sender removed from the
// pool goes away once it means nothing.
func TestASendersTATKeyExpiresASecondPastIt(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS = 1000, 1000
	cfg.Senders = []Sender{{From: "+15550000001", RPS: 0.5}}
	l := newLimiter(t, rdb, cfg)
	if d := try(t, l, OTP); !d.Allowed || d.Sender != "+15550000001" {
		t.Fatalf("admission: %+v, want allowed from the pool's sender", d)
	}
	key := l.pool.floor + "+15550000001"
	// At one instant: MULTI runs them as one.
	var now *redis.TimeCmd
	var tat *redis.StringCmd
	var ttl *redis.DurationCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now, tat, ttl = p.Time(ctx), p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, err := tat.Int64()
	if err != nil {
		t.Fatal(err)
	}
	lead := time.Duration(v-now.Val().UnixMicro()) * time.Microsecond
	if d := ttl.Val() - lead; d < time.Second-2*time.Millisecond || d > time.Second+2*time.Millisecond {
		t.Fatalf("the sender's TAT, %v ahead, lives %v: want a second past it", lead, ttl.Val())
	}
}
