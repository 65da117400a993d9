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
// gcra.lua calls on an account with a sender pool, on an injected clock,
// and asserts that no sender's sends (a send of cost c is c units at its
// slot) hold more than its rate in any window of 1 s + the arrival jitter:
// the provider, seeing each send up to the jitter later, never sees more
// than the sender's rate in a second. Costs go up to the slowest sender's
// rate (a longer message than that goes alone, and is not drawn here).
func TestASenderOfThePoolNeverExceedsItsRate(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	rng := rand.New(rand.NewPCG(propertySeed, 7))
	ctx := context.Background()
	full := 0 // windows a sender filled: the test pressed against the limits
	for seq := range 40 {
		var senders []Sender
		for i := range 1 + rng.IntN(5) {
			senders = append(senders, Sender{From: fmt.Sprint("+1555000000", i), RPS: []float64{1, 3, 3, 10, 30}[rng.IntN(5)]})
		}
		maxCost := 1
		for c := 3; c > 1; c-- {
			if slices.IndexFunc(senders, func(s Sender) bool { return s.RPS < float64(c) }) < 0 {
				maxCost = c
				break
			}
		}
		cfg := Config{
			Account: redistest.UniqueAccount(t), TargetRPS: 1000, MarketingRPS: 1000, Burst: 1 + rng.IntN(5),
			Senders: senders, ArrivalJitter: time.Duration(rng.IntN(2)) * 20 * time.Millisecond,
		}
		rec := &recorder{}
		l := newLimiter(t, rec, cfg)
		type call struct {
			at, lookahead int64
			cost          int
		}
		var plan []call
		at := t0.UnixMicro()
		for range 300 {
			at += rng.Int64N(20_000)
			plan = append(plan, call{at: at, lookahead: rng.Int64N(400_000), cost: 1 + rng.IntN(maxCost)})
		}
		cmds := make([]*redis.Cmd, len(plan))
		scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
			for i, c := range plan {
				g, _ := gcraCall(t, l, rec, bothClasses[rng.IntN(2)], false, ticketOnDenial, time.Hour, 0, Claim{})
				g.args[13] = strconv.Itoa(c.cost)               // ARGV[14]
				g.args[14] = strconv.FormatInt(c.lookahead, 10) // ARGV[15]
				cmds[i] = scripts.send(ctx, p, g, c.at)
			}
		})
		units := map[int64][]int64{} // sender -> unit instants
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
			pick := v[6].(int64)
			if !d.Allowed {
				if pick != 0 {
					t.Fatalf("sequence %d call %d: a denial took sender %d", seq, i, pick)
				}
				continue
			}
			if pick < 1 || int(pick) > len(senders) {
				t.Fatalf("sequence %d call %d: allowed with sender %d of %d", seq, i, pick, len(senders))
			}
			admitted++
			for range plan[i].cost {
				units[pick] = append(units[pick], plan[i].at+d.RetryAfter.Microseconds())
			}
		}
		if admitted == 0 {
			t.Fatalf("sequence %d: nothing admitted", seq)
		}
		w := time.Second.Microseconds() + cfg.ArrivalJitter.Microseconds()
		for pick, u := range units {
			slices.Sort(u)
			rps := senders[pick-1].RPS
			for i := range u {
				j, _ := slices.BinarySearch(u, u[i]+w) // first instant outside [u[i], u[i]+w)
				n := j - i
				if float64(n) >= rps {
					full++
				}
				if float64(n) > rps {
					t.Fatalf("sequence %d (%+v): sender %s had %d units in [%d, %d+%dµs), above its %v/s",
						seq, cfg, senders[pick-1].From, n, u[i], u[i], w, rps)
				}
			}
		}
	}
	if full < 100 {
		t.Fatalf("only %d windows held a sender's whole rate: the sequences do not press against the pool", full)
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
	for i, want := range []string{"+15550000001", "+15550000002"} {
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
