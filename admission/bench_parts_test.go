package admission

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// BenchmarkAdmitParts says where the admission script's time goes: Redis's
// time per call (redis-µs/call) of the script of the parts every call runs
// ("base": the prelude, override, learned rate, penalty, health and the
// global level), then of base without one of its parts, and of base with
// one optional part, on a call that makes that part act (a class held to
// a reserve and with a ceiling, a later class, a sender pool, leases, the
// learned rate's search, a claim, wake tickets, a recovery floor, a
// route's skip). A part's time is the difference to base's, measured side
// by side:
//
//	go test -run '^$' -bench 'AdmitParts$' -benchtime 2000x -count 4 ./admission/ | benchstat -col /script -
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
	for _, r := range rows {
		b.Run("script="+r.name, func(b *testing.B) {
			v := layout(composeParts(r.keep))
			c := call // the lists of a part left out are not sent
			if !r.keep("reserves", withReserves) {
				c.Reserves, c.ReserveLevels = nil, ""
			}
			if !r.keep("pushes", withPushes) {
				c.LaterWakes, c.WakePushes = nil, ""
			}
			if !r.keep("pool", withPool) {
				c.Senders, c.SenderIntervals = nil, ""
			}
			keys, args := v.call(c)
			run := func() bool {
				res, err := v.Run(ctx, rdb, keys, args...).Slice()
				return err == nil && len(res) == replyLen && res[replyAllowed] == int64(1)
			}
			parallel(b, rdb, 1, run)
		})
	}
}
