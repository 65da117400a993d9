package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/redistest"
)

// threeClasses is the configuration of the incident's three systems on
// one account: OTP, cart reminders (transactional, 30/s) and a campaign
// (marketing, 70/s), the classes after OTP sharing 90 - 20.
func threeClasses(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.Classes = []ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", RPS: 30}, {Name: Marketing, RPS: 70}}
	return cfg
}

func TestClassLevels(t *testing.T) {
	type lv struct {
		key     string
		rps     float64
		members []int
	}
	for _, tt := range []struct {
		name     string
		classes  []ClassLimit
		levels   []lv
		ceiling  []int
		reserves [][]int
	}{
		{"the default two: marketing's ceiling, as ever", nil,
			[]lv{{":tat:marketing", 70, []int{1}}}, []int{-1, 0}, [][]int{nil, nil}},
		{"two classes: the first's reserve is the second's ceiling",
			[]ClassLimit{{Name: OTP, Reserve: 30}, {Name: Marketing}},
			[]lv{{":tat:marketing", 60, []int{1}}}, []int{-1, 0}, [][]int{nil, nil}},
		{"three classes: one reserve shared by the two after the first",
			[]ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", RPS: 30}, {Name: Marketing, RPS: 70}},
			[]lv{{":tat:after:otp", 70, []int{1, 2}}, {":tat:transactional", 30, []int{1}}, {":tat:marketing", 70, []int{2}}},
			[]int{-1, 1, 2}, [][]int{nil, {0}, {0}}},
		{"a reserve the classes after it cannot reach is left out",
			[]ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", RPS: 10}, {Name: Marketing, RPS: 50}},
			[]lv{{":tat:transactional", 10, []int{1}}, {":tat:marketing", 50, []int{2}}},
			[]int{-1, 0, 1}, [][]int{nil, nil, nil}},
		{"a reserve looser than an earlier one is left out; the last one's is a ceiling",
			[]ClassLimit{{Name: OTP, Reserve: 40}, {Name: "transactional", Reserve: 10}, {Name: Marketing}},
			[]lv{{":tat:after:otp", 50, []int{1, 2}}, {":tat:transactional", 50, []int{1}}, {":tat:marketing", 50, []int{2}}},
			[]int{-1, 1, 2}, [][]int{nil, {0}, {0}}},
		{"nested reserves",
			[]ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", Reserve: 40}, {Name: Marketing}},
			[]lv{{":tat:after:otp", 70, []int{1, 2}}, {":tat:transactional", 70, []int{1}}, {":tat:marketing", 50, []int{2}}},
			[]int{-1, 1, 2}, [][]int{nil, {0}, {0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{TargetRPS: 90, MarketingRPS: 70, Classes: tt.classes}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			all, ceiling, reserves := classLevels(cfg.withDefaults(), "")
			var got []lv
			for _, l := range all {
				got = append(got, lv{l.key, l.rps, l.members})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.levels) || !slices.Equal(ceiling, tt.ceiling) || fmt.Sprint(reserves) != fmt.Sprint(tt.reserves) {
				t.Errorf("levels %v, ceilings %v, reserves %v;\nwant %v, %v, %v", got, ceiling, reserves, tt.levels, tt.ceiling, tt.reserves)
			}
		})
	}
}

// TestEachClassLeavesTheEarlierOnesTheirPart: each class after the first
// leaves one interval more of every shared tolerance to the classes before
// it, and books ahead on the global level no further than the last class
// does.
func TestEachClassLeavesTheEarlierOnesTheirPart(t *testing.T) {
	l := newLimiter(t, &recorder{}, threeClasses(t))
	gi, gv := interval(90).Microseconds(), interval(70).Microseconds()
	for _, tt := range []struct {
		class    Class
		reserve  int64  // of the global tolerance
		reserves string // ARGV[24]
	}{
		{OTP, 0, ""},
		{"transactional", gi, fmt.Sprintf("%d %d 0", gv, 4*gv)},
		{Marketing, 2 * gi, fmt.Sprintf("%d %d %d", gv, 4*gv, gv)},
	} {
		a := l.call(tt.class)
		if a.Reserve != tt.reserve || a.ReserveLevels != tt.reserves {
			t.Errorf("%s: reserve %d, reserves %q; want %d, %q", tt.class, a.Reserve, a.ReserveLevels, tt.reserve, tt.reserves)
		}
	}
	otp, tr := l.classes[OTP], l.classes["transactional"]
	if la, want := l.lookahead(otp, 1), interval(30)+interval(90); la != want {
		t.Errorf("OTP's lookahead %v, want %v: past the slowest later class's slot", la, want)
	}
	if la, want := l.lookahead(tr, 1), interval(70); la != want {
		t.Errorf("transactional's lookahead %v, want %v: no further than marketing's", la, want)
	}
}

func TestClassesThatCannotHoldAreRefused(t *testing.T) {
	for _, tt := range []struct {
		classes []ClassLimit
		want    string
	}{
		{[]ClassLimit{{Name: "OTP"}}, `"OTP": must be 1 to 32`},
		{[]ClassLimit{{Name: "global"}}, `"global" names the account's own level`},
		{[]ClassLimit{{Name: OTP}, {Name: OTP}}, `"otp" is listed twice`},
		{[]ClassLimit{{Name: OTP}, {Name: Marketing, RPS: 91}}, `"marketing": RPS must be`},
		{[]ClassLimit{{Name: OTP, Reserve: 90}, {Name: Marketing, RPS: 10}}, `"otp": Reserve must be`},
		{[]ClassLimit{{Name: OTP}, {Name: Marketing, Reserve: 10}}, `it is the last`},
		{[]ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", RPS: 30}, {Name: Marketing, RPS: 80}},
			`"marketing": RPS 80 cannot hold with "otp"'s Reserve 20`},
	} {
		err := Config{TargetRPS: 90, Classes: tt.classes}.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "Classes" || !strings.Contains(ce.Reason, tt.want) {
			t.Errorf("%v: %v, want a ConfigError of Classes saying %q", tt.classes, err, tt.want)
		}
	}
	if err := threeClasses(t).Validate(); err != nil {
		t.Errorf("the three classes: %v", err)
	}
}

func TestAClassTheAccountDoesNotHaveIsAnError(t *testing.T) {
	l := newLimiter(t, &recorder{}, testConfig(t))
	if _, err := l.acquire(context.Background(), "transactional", time.Second); err == nil || !strings.Contains(err.Error(), `no class "transactional"`) {
		t.Errorf("Acquire of a class the account lacks: %v", err)
	}
	if got := l.Classes(); !slices.Equal(got, []Class{OTP, Marketing}) {
		t.Errorf("Classes() = %v", got)
	}
}

// randomClasses returns three classes that hold on an account of target:
// random reserves, and ceilings at most what the reserves before each
// leave it (sometimes exactly that, sometimes the default).
func randomClasses(rng *rand.Rand, target float64) []ClassLimit {
	c := []ClassLimit{{Name: OTP}, {Name: "transactional"}, {Name: Marketing}}
	room := target
	for i := range c {
		switch rng.IntN(3) {
		case 0:
			c[i].RPS = max(room*logUniform(rng, 0.02, 1), MinRPS)
		case 1:
			c[i].RPS = room
		default:
			if room < target {
				c[i].RPS = room // the default, target, would not hold
			}
		}
		if i < 2 && rng.IntN(2) == 0 {
			c[i].Reserve = target * rng.Float64() * 0.9
			room = min(room, target-c[i].Reserve)
		}
	}
	return c
}

// TestThreeClassesKeepEveryLevel runs random sequences of the admission script calls of
// three classes, with the ARGV the Limiter builds, on a random
// non-decreasing injected clock, and asserts that no window holds more than
// its level allows: every class under its ceiling, the classes after each
// class together under TargetRPS minus its reserve, all of them under
// TargetRPS (each plus its burst).
func TestThreeClassesKeepEveryLevel(t *testing.T) {
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	rng := rand.New(rand.NewPCG(propertySeed, 3))
	const sequences, calls = 40, 300
	for seq := range sequences {
		target := logUniform(rng, 1, 5000)
		cfg := testConfig(t)
		cfg.Account += "-" + strconv.Itoa(seq)
		cfg.TargetRPS, cfg.Burst, cfg.Classes = target, 1+rng.IntN(8), randomClasses(rng, target)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("sequence %d: %v", seq, err)
		}
		rec := &recorder{}
		l := newLimiter(t, rec, cfg)
		step := interval(target).Microseconds()
		at := t0.UnixMicro()
		plan := make([]propCall, calls)
		var sent []scriptCall
		for i := range plan {
			if rng.Float64() < 0.7 {
				at += rng.Int64N(2*step + 1)
			}
			c := propCall{at: at, class: l.order[rng.IntN(3)], tickets: [...]string{ticketNone, ticketOnDenial, ticketAlways}[rng.IntN(3)], cost: 1}
			c.lookahead = l.lookahead(l.classes[c.class], 1)
			if rng.IntN(3) == 0 {
				c.lookahead = time.Duration(rng.Int64N(3*step+1)) * time.Microsecond
			}
			plan[i] = c
			g, _ := gcraCall(t, l, rec, c.class, false, c.tickets, time.Hour, c.lookahead, Claim{})
			sent = append(sent, g)
		}
		cmds := make([]*redis.Cmd, calls)
		scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
			for i, g := range sent {
				cmds[i] = scripts.send(context.Background(), p, g, plan[i].at)
			}
		})
		deleteKeysAtEnd(t, rdb, sent...)
		byClass := map[Class][]int64{}
		for i, cmd := range cmds {
			d, err := gcraReplyErr(cmd)
			if err != nil {
				t.Fatalf("sequence %d call %d (%v): %v", seq, i+1, plan[i], err)
			}
			if d.Allowed {
				byClass[plan[i].class] = append(byClass[plan[i].class], plan[i].at+d.RetryAfter.Microseconds())
			}
		}
		check := func(name string, instants []int64, rate float64, burst int) {
			t.Helper()
			slices.Sort(instants)
			iv := float64(interval(rate).Microseconds())
			for _, w := range []int64{int64(iv), 10 * int64(iv), 1e6} {
				if a, n, over := overWindow(instants, w, 1e6/iv, burst); over {
					t.Errorf("sequence %d (%v, burst %d): %s: %d sends in [%d, %d+%dµs], over %v/s + burst %d",
						seq, cfg.Classes, cfg.Burst, name, n, a, a, w, 1e6/iv, burst)
				}
			}
		}
		var all []int64
		for i, k := range cfg.withDefaults().Classes {
			all = append(all, byClass[k.Name]...)
			check(string(k.Name), byClass[k.Name], k.RPS, max(cfg.Burst, 2))
			if k.Reserve > 0 {
				var after []int64
				for _, j := range cfg.Classes[i+1:] {
					after = append(after, byClass[j.Name]...)
				}
				check("after "+string(k.Name), after, target-k.Reserve, max(cfg.Burst, 2))
			}
		}
		check("all classes", all, target, cfg.Burst)
	}
}

// runs counts classRun's runs.
var runs int

// classRun drives the classes of cfg from three Limiters (three processes)
// on a real Redis, on an injected clock: every 2 ms for seconds,
// each class of saturate asks for a slot (with the lookahead its Limiter
// uses), and every class of every asks once each every. It returns, by
// class, each allowed call's wait and the instants of the slots.
func classRun(t *testing.T, cfg Config, seconds int, saturate []Class, every map[Class]time.Duration) (waits map[Class][]time.Duration, slots map[Class][]int64) {
	t.Helper()
	rdb := redistest.Client(t)
	scripts := loadScripts(t, rdb)
	rec := &recorder{}
	runs++
	cfg.Account += "-run" + strconv.Itoa(runs) // each run on an account of its own
	var pods [3]*Limiter
	for i := range pods {
		pods[i] = newLimiter(t, rec, cfg)
	}
	type ask struct {
		at    int64
		class Class
		call  scriptCall
	}
	var asks []ask
	start := t0.UnixMicro()
	n := 0
	add := func(at int64, class Class) {
		l := pods[n%3]
		n++
		c := l.classes[class]
		g, _ := gcraCall(t, l, rec, class, false, ticketNone, time.Hour, l.lookahead(c, 1), Claim{})
		asks = append(asks, ask{at, class, g})
	}
	next := map[Class]int64{}
	for ms := int64(0); ms < int64(seconds)*1000; ms += 2 {
		at := start + ms*1000
		for _, c := range cfg.withDefaults().Classes {
			if e, ok := every[c.Name]; ok && at >= start+next[c.Name] {
				add(at, c.Name)
				next[c.Name] += e.Microseconds()
			}
		}
		for _, c := range saturate {
			add(at, c)
		}
	}
	cmds := make([]*redis.Cmd, len(asks))
	scripts.pipeline(t, rdb, func(p redis.Pipeliner) {
		for i, a := range asks {
			cmds[i] = scripts.send(context.Background(), p, a.call, a.at)
		}
	})
	calls := make([]scriptCall, len(asks))
	for i, a := range asks {
		calls[i] = a.call
	}
	deleteKeysAtEnd(t, rdb, calls...)
	waits, slots = map[Class][]time.Duration{}, map[Class][]int64{}
	for i, cmd := range cmds {
		d, err := gcraReplyErr(cmd)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		a := asks[i]
		if _, measured := every[a.class]; measured && !d.Allowed {
			waits[a.class] = append(waits[a.class], -1) // denied: it would ask again
		}
		if d.Allowed {
			if _, measured := every[a.class]; measured {
				waits[a.class] = append(waits[a.class], d.RetryAfter)
			}
			slots[a.class] = append(slots[a.class], a.at+d.RetryAfter.Microseconds())
		}
	}
	return waits, slots
}

// rateOf is the rate of the slots after the first second (the bursts
// spent), per second.
func rateOf(slots []int64, seconds int) float64 {
	from, n := t0.UnixMicro()+1e6, 0
	for _, s := range slots {
		if s >= from && s < t0.UnixMicro()+int64(seconds)*1e6 {
			n++
		}
	}
	return float64(n) / float64(seconds-1)
}

// TestAnEarlierClassNeverWaitsForALaterOne: while the classes after it
// take every slot they can, across three processes, an OTP is admitted at
// once or within one interval of the account's rate, and a transactional
// message (its own ceiling free) within one interval of the slowest level
// it shares with marketing.
func TestAnEarlierClassNeverWaitsForALaterOne(t *testing.T) {
	cfg := threeClasses(t)
	bound := newLimiter(t, &recorder{}, cfg).lastSpacing
	waits, _ := classRun(t, cfg, 2, []Class{"transactional", Marketing}, map[Class]time.Duration{OTP: 53 * time.Millisecond})
	for _, w := range waits[OTP] {
		if w < 0 || w > bound {
			t.Fatalf("an OTP behind transactional and marketing: waits %v (-1: denied); want each within %v", waits[OTP], bound)
		}
	}
	waits, _ = classRun(t, cfg, 2, []Class{Marketing}, map[Class]time.Duration{"transactional": 41 * time.Millisecond})
	for _, w := range waits["transactional"] {
		if w < 0 || w > bound {
			t.Fatalf("transactional behind marketing: waits %v (-1: denied); want each within %v", waits["transactional"], bound)
		}
	}
}

// TestAClassesUnusedRoomGoesToTheClassesAfterIt: with OTP idle the two
// classes after it share what OTP's reserve leaves them, transactional up
// to its ceiling; with transactional idle too, marketing takes its ceiling.
func TestAClassesUnusedRoomGoesToTheClassesAfterIt(t *testing.T) {
	cfg := threeClasses(t)
	_, slots := classRun(t, cfg, 3, []Class{"transactional", Marketing}, nil)
	tr, mk := rateOf(slots["transactional"], 3), rateOf(slots[Marketing], 3)
	if tr < 29 || tr+mk < 0.97*70 || tr+mk > 70.5 {
		t.Errorf("OTP idle: transactional %.1f/s, marketing %.1f/s; want transactional at its 30 and the two at 70 together", tr, mk)
	}
	_, slots = classRun(t, cfg, 3, []Class{Marketing}, nil)
	if mk := rateOf(slots[Marketing], 3); mk < 0.97*70 || mk > 70.5 {
		t.Errorf("OTP and transactional idle: marketing %.1f/s, want its ceiling 70", mk)
	}
	_, slots = classRun(t, cfg, 3, []Class{OTP, "transactional", Marketing}, nil)
	all := rateOf(slots[OTP], 3) + rateOf(slots["transactional"], 3) + rateOf(slots[Marketing], 3)
	if later := rateOf(slots["transactional"], 3) + rateOf(slots[Marketing], 3); all < 0.97*90 || all > 90.5 || later > 70.5 {
		t.Errorf("every class saturated: %.1f/s in all, %.1f/s after OTP; want 90 and at most 70", all, later)
	}
}

// TestThreeSaturatedClassesCostAboutOneCallPerAdmission: with the classes
// after OTP waiting in three processes and OTP coming at 20/s, an
// admission still costs about one script call: 1.25 with the default two
// classes and with three (whose two later classes share one reserve; 1.55
// before a slot a class takes of a shared reserve pushed the later class's
// next wake ticket).
func TestThreeSaturatedClassesCostAboutOneCallPerAdmission(t *testing.T) {
	cfg := threeClasses(t)
	pods, recs := recordedLimiters(t, 3, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	admitted := map[Class]int{}
	var wg sync.WaitGroup
	for i := range 3 * 3 * 4 {
		wg.Go(func() {
			l, class := pods[i%3], cfg.Classes[(i/3)%3].Name
			for ctx.Err() == nil {
				if d, err := l.acquire(ctx, class, 8*time.Second); err == nil && d.Allowed {
					mu.Lock()
					admitted[class]++
					mu.Unlock()
				}
				if class == OTP {
					select { // 4 callers in each of 3 processes: 20/s
					case <-ctx.Done():
					case <-time.After(600 * time.Millisecond):
					}
				}
			}
		})
	}
	wg.Wait()
	calls, n := 0, 0
	for _, r := range recs {
		calls += r.Len()
	}
	for _, c := range admitted {
		n += c
	}
	ratio := float64(calls) / float64(n)
	t.Logf("%d script calls for %d admissions %v: %.2f per admission", calls, n, admitted, ratio)
	if n < 100 || ratio > 1.4 {
		t.Fatalf("%d calls for %d admissions %v (%.2f each), want ≤ 1.4 each", calls, n, admitted, ratio)
	}
}

// TestTheOverridesSecondRateHasACeilingToLower: the override's second rate
// lowers the last class's ceiling, which it has even at the account's rate
// and when it is the account's only class, unless that class is otp alone.
func TestTheOverridesSecondRateHasACeilingToLower(t *testing.T) {
	for _, tt := range []struct {
		name    string
		classes []ClassLimit
		last    Class
		want    bool
	}{
		{"the default two", nil, Marketing, true},
		{"marketing at the account's rate", []ClassLimit{{Name: OTP, Policy: policy.Default("otp")}, {Name: Marketing, RPS: 90}}, Marketing, true},
		{"an account of marketing alone", []ClassLimit{{Name: Marketing, RPS: 70}}, Marketing, true},
		{"an account of marketing alone, at the account's rate", []ClassLimit{{Name: Marketing}}, Marketing, true},
		{"an account of OTP alone", []ClassLimit{{Name: OTP, Policy: policy.Default("otp")}}, OTP, false},
	} {
		cfg := testConfig(t)
		cfg.Classes = tt.classes
		a := newLimiter(t, &recorder{}, cfg).call(tt.last)
		if a.OverrideCeiling != tt.want || (a.CeilingInterval > 0) != tt.want {
			t.Errorf("%s: the override lowers %s's ceiling %v (interval %dµs), want %v", tt.name, tt.last, a.OverrideCeiling, a.CeilingInterval, tt.want)
		}
	}
}
