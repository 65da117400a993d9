package admission

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/redistest"
)

// BenchmarkAcquire compares one TryAcquire (one script call) with
// go-redis/redis_rate's Allow (one GCRA level) on the same Redis, with 1
// and 64 concurrent callers, at two configurations: the defaults (a
// marketing send: penalty and two GCRA levels, the global one and the
// class's ceiling) and redis_rate's (one class, one level, nothing else),
// whose script leaves out the parts it does not use (compose.go). Rates
// are set high so that every call takes its admitting (writing) path.
// Besides the rate of calls it reports Redis's own time per script call
// (redis-µs/call: INFO commandstats' usec of EVALSHA over its calls,
// before and after), which the Go side's share of a loaded machine does
// not blur.
//
//	go test -run '^$' -bench 'Acquire$' -benchtime 1s -count 4 ./admission/ | benchstat -col /impl -
func BenchmarkAcquire(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for _, ours := range []struct {
			name    string
			classes []ClassLimit
			class   Class
		}{
			{"ours", nil, Marketing},
			{"ours-one-level", []ClassLimit{{Name: OTP, Policy: policy.Default(OTP.String())}}, OTP},
		} {
			b.Run("impl="+ours.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				cfg := Config{Account: redistest.UniqueAccount(b), TargetRPS: 1e6, MarketingRPS: 1e6, Burst: 1e6, Classes: ours.classes}
				rdb := redistest.Client(b)
				l, err := New(rdb, cfg)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				parallel(b, rdb, callers, func() bool {
					d, err := l.tryOnce(ctx, ours.class)
					return err == nil && d.Source == SourceRedis
				})
			})
		}
		b.Run("impl=redis_rate/callers="+strconv.Itoa(callers), func(b *testing.B) {
			rdb := redistest.Client(b)
			rl := redis_rate.NewLimiter(rdb)
			key := redistest.UniqueAccount(b)
			limit := redis_rate.Limit{Rate: 1e6, Burst: 1e6, Period: time.Second}
			ctx := context.Background()
			parallel(b, rdb, callers, func() bool {
				_, err := rl.Allow(ctx, key, limit)
				return err == nil
			})
		})
	}
}

// parallel runs b.N calls of fn spread over n goroutines and reports the
// rate of calls per second, and Redis's time per EVALSHA on rdb's server
// meanwhile (other users of the server count too: run it alone).
func parallel(b *testing.B, rdb *redis.Client, n int, fn func() bool) {
	b.Helper()
	if !fn() { // warm up: load the script, open a connection
		b.Fatal("warm-up call failed")
	}
	calls0, usec0 := evalshaStats(b, rdb)
	defer func() {
		calls, usec := evalshaStats(b, rdb)
		if calls > calls0 {
			b.ReportMetric(float64(usec-usec0)/float64(calls-calls0), "redis-µs/call")
		}
	}()
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

// evalshaStats returns the calls of EVALSHA and the microseconds Redis spent
// in them, from INFO commandstats.
func evalshaStats(b *testing.B, rdb *redis.Client) (calls, usec int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for f := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					calls, _ = strconv.ParseInt(v, 10, 64)
				case "usec":
					usec, _ = strconv.ParseInt(v, 10, 64)
				}
			}
		}
	}
	return calls, usec
}
