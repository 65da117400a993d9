package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// BenchmarkAdmitParts says where the admission script's time goes: Redis's
// time per call (redis-µs/call) of base, the script of the parts every
// call runs (the prelude, override, learned rate, penalty, health and the
// global level), and of base without one of its parts, or with one
// optional part, on a call that makes that part act (a class held to a
// reserve and with a ceiling, a later class, a sender pool, leases, the
// learned rate's search, a claim, wake tickets, a recovery floor, a
// route's skip). The part's time (part-µs/call) is the difference to
// base's, run in turns with it:
//
//	go test -run '^$' -bench 'AdmitParts$' -benchtime 2000x -count 4 ./admission/
func BenchmarkAdmitParts(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	cfg := Config{Account: redistest.UniqueAccount(b), TargetRPS: 1e6, Burst: 1e6, MaxInFlight: 1e9,
		Classes:  []ClassLimit{{Name: OTP, Reserve: 1e5}, {Name: "transactional", RPS: 5e5}, {Name: Marketing, RPS: 7e5}},
		Senders:  []Sender{{From: "A", RPS: 1e6}},
		Adaptive: Adaptive{Enabled: true}}
	l, err := New(rdb, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.pool.build(ctx, rdb); err != nil {
		b.Fatal(err)
	}
	call := l.classes["transactional"].admit
	call.Tickets, call.Within, call.Lookahead = ticketAlways, time.Hour.Microseconds(), 0
	call.Lease, call.Record, call.Token, call.ClaimMillis = "lease", l.claims.Key("bench"), "t", 60_000
	call.RecoveryFloor, call.Skip = 1, l.skipKey("+62")
	all := partsOf(call)
	base := func(name string, opt partSet) bool { return opt == 0 }
	rows := []struct {
		name string
		keep func(name string, opt partSet) bool
	}{{"base", base}}
	for _, p := range admitParts {
		if p.opt == 0 && p.name != "global" {
			rows = append(rows, struct {
				name string
				keep func(string, partSet) bool
			}{"base-" + p.name, func(n string, opt partSet) bool { return base(n, opt) && n != p.name }})
		}
	}
	for _, p := range admitParts {
		if p.opt != 0 && all&p.opt != 0 {
			rows = append(rows, struct {
				name string
				keep func(string, partSet) bool
			}{"base+" + p.name, func(n string, opt partSet) bool { return opt == 0 || opt == p.opt }})
		}
	}
	// Each row runs its script and base's in turns of 100 calls, so that
	// both see the same load: the part's time is the difference.
	variant := func(keep func(string, partSet) bool) (*admitVariant, []string, []any) {
		v := layout(composeParts(keep))
		c := call // the lists of a part left out are not sent
		if !keep("reserves", withReserves) {
			c.Reserves, c.ReserveLevels = nil, ""
		}
		if !keep("pushes", withPushes) {
			c.LaterWakes, c.WakePushes = nil, ""
		}
		if !keep("pool", withPool) {
			c.Senders, c.SenderIntervals = nil, ""
		}
		keys, args := v.call(c)
		return v, keys, args
	}
	turn := func(b *testing.B, keep func(string, partSet) bool, n int) (usec, calls int64) {
		v, keys, args := variant(keep)
		c0, u0 := evalshaStats(b, rdb)
		for range n {
			res, err := v.Run(ctx, rdb, keys, args...).Slice()
			if err != nil || len(res) != replyLen || res[replyAllowed] != int64(1) {
				b.Fatalf("%v %v", res, err)
			}
		}
		c1, u1 := evalshaStats(b, rdb)
		return u1 - u0, c1 - c0
	}
	for _, r := range rows[1:] {
		b.Run("script="+r.name, func(b *testing.B) {
			turn(b, base, 1)
			turn(b, r.keep, 1) // loaded
			var us, bus, n, bn int64
			for done := 0; done < b.N; done += 100 {
				u, c := turn(b, base, 100)
				bus, bn = bus+u, bn+c
				u, c = turn(b, r.keep, 100)
				us, n = us+u, n+c
			}
			b.ReportMetric(float64(bus)/float64(bn), "base-µs/call")
			b.ReportMetric(float64(us)/float64(n), "redis-µs/call")
			part := float64(us)/float64(n) - float64(bus)/float64(bn)
			if strings.HasPrefix(r.name, "base-") {
				part = -part // base holds the part, the row does not
			}
			b.ReportMetric(part, "part-µs/call")
		})
	}
}
