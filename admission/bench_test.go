package admission

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"smsdispatcher/internal/redistest"
)

// BenchmarkAcquire compares one TryAcquire (penalty + two GCRA levels, one
// script call) with go-redis/redis_rate's Allow (one GCRA level) on the same
// Redis, with 1 and 64 concurrent callers. Rates are set high so that both
// take their admitting (writing) path.
//
//	go test -run '^$' -bench Acquire -count 6 ./admission/ | benchstat -col /impl -
func BenchmarkAcquire(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run("impl=ours/callers="+strconv.Itoa(callers), func(b *testing.B) {
			cfg := Config{Account: redistest.UniqueAccount(b), TargetRPS: 1e6, MarketingRPS: 1e6, Burst: 1e6}
			l, err := New(redistest.Client(b), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			parallel(b, callers, func() bool {
				d, err := l.TryAcquire(ctx, Marketing)
				return err == nil && d.Source == SourceRedis
			})
		})
		b.Run("impl=redis_rate/callers="+strconv.Itoa(callers), func(b *testing.B) {
			rl := redis_rate.NewLimiter(redistest.Client(b))
			key := redistest.UniqueAccount(b)
			limit := redis_rate.Limit{Rate: 1e6, Burst: 1e6, Period: time.Second}
			ctx := context.Background()
			parallel(b, callers, func() bool {
				_, err := rl.Allow(ctx, key, limit)
				return err == nil
			})
		})
	}
}

// parallel runs b.N calls of fn spread over n goroutines and reports the
// rate of calls per second.
func parallel(b *testing.B, n int, fn func() bool) {
	b.Helper()
	if !fn() { // warm up: load the script, open a connection
		b.Fatal("warm-up call failed")
	}
	var failed sync.Once
	var bad bool
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for i := g; i < b.N; i += n {
				if !fn() {
					failed.Do(func() { bad = true })
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
	if bad {
		b.Fatal("a call failed or fell back")
	}
}
