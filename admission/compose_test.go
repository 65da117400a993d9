package admission

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestEachPartOnARealRedis runs, for each part of the admission script, a
// call whose keys make that part act, on the script of the call's parts
// and on the same script without that part: the part's answer or write
// comes with the part, and only with it.
func TestEachPartOnARealRedis(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	far := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	for _, tt := range []struct {
		part string
		// setup returns the call, after writing the keys that make the
		// part act.
		setup func(t *testing.T, l *Limiter) admitCall
		// with says whether the reply (and Redis after it) shows the part.
		with func(t *testing.T, l *Limiter, c admitCall, v []any) bool
	}{
		{"record", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			c.Record, c.Token, c.ClaimMillis = l.claims.Key("id"), "t", 60_000
			setKey(t, rdb, c.Record, "sent")
			return c
		}, reason(codeRecord)},
		{"penalty", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			if err := rdb.Set(ctx, c.Penalty, "throttled", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			return c
		}, reason(codePenalty)},
		{"health", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.Health, "d 0 0 0 0 "+far+" 0")
			return c
		}, reason(codeDegraded)},
		{"route", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			c.Skip = l.skipKey("+62")
			setKey(t, rdb, c.Skip, far)
			return c
		}, reason(codeRouteSkipped)},
		{"override", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.Override, "nan 0")
			return c
		}, func(_ *testing.T, _ *Limiter, _ admitCall, v []any) bool {
			return v[replyIgnored] == int64(ignoredOverride)
		}},
		{"learned", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.Learned, "1 0 0 0 P 0 0")
			return c
		}, func(_ *testing.T, _ *Limiter, _ admitCall, v []any) bool { return v[replyLearned] == int64(1000) }},
		{"global", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.GlobalTAT, far)
			return c
		}, reason(codeGlobal)},
		{"ceiling", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(Marketing)
			setKey(t, rdb, c.CeilingTAT, far)
			return c
		}, reason(codeCeiling)},
		{"reserves", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(Marketing)
			setKey(t, rdb, c.Reserves[0], far)
			return c
		}, reason(codeReserve)},
		{"leases", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			c.MaxInFlight, c.Lease = 1, "mine"
			if err := rdb.ZAdd(ctx, c.Leases, redis.Z{Score: 1e18, Member: "other"}).Err(); err != nil {
				t.Fatal(err)
			}
			return c
		}, reason(codeInFlight)},
		{"pool", func(_ *testing.T, l *Limiter) admitCall {
			return l.call(OTP) // its indexes never built
		}, reason(codePoolMissing)},
		{"wake", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			c.Tickets, c.Within = ticketOnDenial, time.Hour.Microseconds()
			setKey(t, rdb, c.GlobalTAT, far)
			return c
		}, func(t *testing.T, _ *Limiter, c admitCall, _ []any) bool { return getKey(t, rdb, c.Wake) != "" }},
		{"pushes", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.LaterWakes[0], far+" "+far)
			return c
		}, func(t *testing.T, _ *Limiter, c admitCall, _ []any) bool {
			return getKey(t, rdb, c.LaterWakes[0]) != far+" "+far
		}},
		{"floor", func(_ *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			c.RecoveryFloor = time.Hour.Microseconds()
			return c
		}, func(t *testing.T, _ *Limiter, c admitCall, _ []any) bool {
			tat, _ := strconv.ParseInt(getKey(t, rdb, c.GlobalTAT), 10, 64)
			return tat > time.Now().Add(30*time.Minute).UnixMicro()
		}},
		{"search", func(t *testing.T, l *Limiter) admitCall {
			c := l.call(OTP)
			setKey(t, rdb, c.Learned, "1 1 10 0 s 0 1") // due, and pressed: the search moves up
			return c
		}, func(t *testing.T, _ *Limiter, c admitCall, _ []any) bool {
			return getKey(t, rdb, c.Learned) != "1 1 10 0 s 0 1"
		}},
	} {
		t.Run(tt.part, func(t *testing.T) {
			opt := partSet(0)
			for _, p := range admitParts {
				if p.name == tt.part {
					opt = p.opt
				}
			}
			for _, in := range []bool{true, false} {
				if !in && tt.part == "global" {
					continue // the decision itself: no script without it
				}
				l := newLimiter(t, rdb, partConfig(t))
				if tt.part != "pool" {
					if err := l.pool.build(ctx, rdb); err != nil {
						t.Fatal(err)
					}
				}
				orig := tt.setup(t, l)
				c := orig
				v := layout(composeParts(func(name string, o partSet) bool {
					if name == tt.part || (name == "search" && tt.part == "learned") { // the search moves the learned rate
						return in
					}
					return o == 0 || partsOf(orig)&o != 0
				}))
				if opt != 0 && partsOf(orig)&opt == 0 {
					t.Fatalf("the call does not use the part")
				}
				if !in {
					c = without(c, opt)
				}
				keys, args := v.call(c)
				t.Cleanup(func() { rdb.Del(context.Background(), orig.keys()...) })
				res, err := v.Run(ctx, rdb, keys, args...).Slice()
				if err != nil {
					t.Fatalf("in=%v: %v", in, err)
				}
				if got := tt.with(t, l, orig, res); got != in {
					t.Errorf("in=%v: the reply %v (and Redis) show the part: %v", in, res, got)
				}
			}
		})
	}
}

// partConfig is a configuration whose calls use every part: three classes
// (a reserve the later two share, ceilings), a pool, leases, learning.
func partConfig(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.Classes = []ClassLimit{{Name: OTP, Reserve: 20}, {Name: "transactional", RPS: 30}, {Name: Marketing, RPS: 60}}
	cfg.Senders = []Sender{{From: "A", RPS: 50}}
	cfg.Adaptive = Adaptive{Enabled: true}
	return cfg
}

// without returns c with the arguments of the optional parts in opt as a
// call that does not use them has them: partsOf(c) then leaves them out.
func without(c admitCall, opt partSet) admitCall {
	if opt&withReserves != 0 {
		c.Reserves, c.ReserveLevels = nil, ""
	}
	if opt&withPushes != 0 {
		c.LaterWakes, c.WakePushes = nil, ""
	}
	if opt&withPool != 0 {
		c.Senders, c.SenderIntervals = nil, ""
	}
	if opt&withCeiling != 0 {
		c.CeilingInterval, c.CeilingTau, c.OverrideCeiling = 0, 0, false
	}
	if opt&withSearch != 0 {
		c.Adaptive = ""
	}
	if opt&withLeases != 0 {
		c.MaxInFlight = 0
	}
	if opt&withRecord != 0 {
		c.Token = ""
	}
	if opt&withTickets != 0 {
		c.Tickets = ticketNone
	}
	if opt&withFloor != 0 {
		c.RecoveryFloor = 0
	}
	if opt&withRoute != 0 {
		c.Skip = strings.TrimSuffix(c.Skip, "+62")
	}
	return c
}

// reason says whether a reply is a denial (or POOL_MISSING) with code.
func reason(code int64) func(*testing.T, *Limiter, admitCall, []any) bool {
	return func(_ *testing.T, _ *Limiter, _ admitCall, v []any) bool {
		return v[replyAllowed] == int64(0) && v[replyReason] == code
	}
}

func setKey(t *testing.T, rdb *redis.Client, key, v string) {
	t.Helper()
	if err := rdb.Set(context.Background(), key, v, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
}

func getKey(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// TestASendSetsOnlyItsOwnArguments: a send's call differs from its
// class's only in the ARGV perSend names, so that admitVariant.send may
// take every other value as the class's, boxed once; and send lays a call
// out as its full KEYS and ARGV say.
func TestASendSetsOnlyItsOwnArguments(t *testing.T) {
	cfg := partConfig(t)
	cfg.MaxInFlight = 5
	cfg.Classes[0].Policy.SkipsFailingRoute = true
	l := newLimiter(t, &recorder{}, cfg)
	claim := Claim{ID: "id", Token: "t", TTL: time.Minute, Count: true, Failover: true, Hedged: true, Prefix: "+62"}
	for _, name := range l.order {
		c := l.classes[name]
		call := l.admitCallOf(c, 3, true, ticketAlways+" 2", time.Hour, time.Second, claim)
		full, class := call.argv(), c.admit.argv()
		for n := 1; n <= admitArgs; n++ {
			if changed := full[n-1] != class[n-1]; changed && !perSend(n) {
				t.Errorf("%s: a send sets ARGV[%d] (%v, the class's %v); perSend does not say so", name, n, full[n-1], class[n-1])
			}
		}
		v := layout(composeAdmit(allParts))
		keys, args := v.send(&call, c.argv)
		allKeys := call.keys()
		for i, k := range v.keys {
			if keys[i] != allKeys[k-1] {
				t.Errorf("%s: KEYS[%d] sent %q, want %q", name, k, keys[i], allKeys[k-1])
			}
		}
		if !slices.Equal(keys[len(v.keys):], allKeys[fixedKeys:]) {
			t.Errorf("%s: lists sent %q, want %q", name, keys[len(v.keys):], allKeys[fixedKeys:])
		}
		for i, a := range v.args {
			if args[i] != full[a-1] {
				t.Errorf("%s: ARGV[%d] sent %v, want %v", name, a, args[i], full[a-1])
			}
		}
	}
}

// TestEndCallsWriteTheEndsInPlace: a part's return of stop or deny
// becomes the prelude's lines, indented as the call, after the call's
// arguments made locals; commas within brackets or strings do not split
// them, and a call in a comment stays as it is.
func TestEndCallsWriteTheEndsInPlace(t *testing.T) {
	ends := map[string]string{"deny": "if ticket then\n  wait = 1\nend\nreturn {wait}\n", "stop": "return {wait}\n"}
	src := "if x then\n  return deny(math.max(a, b), 2, s[3] .. ', )')\nend\n-- return stop(z, 1)\nreturn stop(0, 9)\n"
	want := "if x then\n  local wait, reason, detail = math.max(a, b), 2, s[3] .. ', )'\n  if ticket then\n    wait = 1\n  end\n  return {wait}\nend\n" +
		"-- return stop(z, 1)\nlocal wait, reason, detail = 0, 9\nreturn {wait}\n"
	if got := endCalls("test.lua", src, ends); got != want {
		t.Errorf("endCalls:\n%s\nwant:\n%s", got, want)
	}
	for _, bad := range []string{"return deny(1)\n", "return stop(1, 2\n"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("endCalls(%q) did not panic", bad)
				}
			}()
			endCalls("test.lua", bad, ends)
		}()
	}
}
