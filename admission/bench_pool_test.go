package admission

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"smsdispatcher/internal/redistest"
)

// BenchmarkAcquirePool measures one TryAcquire on an account with a sender
// pool of 1 to 10,000 senders, each fast enough that the pool never denies:
// every call takes a sender, the one whose slot opens first. Redis's time
// per call (redis-µs/call) is the figure: a pool costs O(log N) per
// admission, so 10,000 senders cost about what 10 do.
//
//	go test -run '^$' -bench AcquirePool -count 4 ./admission/ | benchstat -col /pool -
func BenchmarkAcquirePool(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1_000, 10_000} {
		b.Run("pool="+strconv.Itoa(n), func(b *testing.B) {
			cfg := Config{Account: redistest.UniqueAccount(b), TargetRPS: 1e6, MarketingRPS: 1e6, Burst: 1e6}
			for i := range n {
				cfg.Senders = append(cfg.Senders, Sender{From: fmt.Sprint("+1555", 1_000_000+i), RPS: 1e6})
			}
			rdb := redistest.Client(b)
			l, err := New(rdb, cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			parallel(b, rdb, 1, func() bool {
				d, err := l.tryOnce(ctx, Marketing)
				return err == nil && d.Source == SourceRedis && d.Sender != ""
			})
		})
	}
}
