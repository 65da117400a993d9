package deferral

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// usedMemory is INFO memory's used_memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// BenchmarkCapMemory measures the cap's keys (max_per_recipient): the
// bytes per number, by used_memory over 20,000 numbers, each with count
// places taken by UUID-long ids (36 characters), for the sizing in
// docs/windows.md:
//
//	go test -run '^$' -bench CapMemory -benchtime 1x ./deferral/
func BenchmarkCapMemory(b *testing.B) {
	const numbers = 20000
	rdb := redistest.Client(b)
	ctx := context.Background()
	for _, count := range []int{1, 3, 10} {
		b.Run(fmt.Sprint("count=", count), func(b *testing.B) {
			for b.Loop() {
				cl := "mem" + fmt.Sprint(time.Now().UnixNano())
				rules := policy.Sending{Cap: policy.Cap{Count: count, Per: 24 * time.Hour, Drop: true}}
				s := New(rdb, nil, nil)
				before := usedMemory(b, rdb)
				for n := range numbers {
					to := fmt.Sprintf("+3361%07d", n)
					for i := range count {
						id := fmt.Sprintf("%08x-0000-4000-8000-%012x", n, i)
						if j, err := s.Judge(ctx, msg(cl, id, to), rules); err != nil || j.Verdict != Send {
							b.Fatal(j, err)
						}
					}
				}
				b.ReportMetric(float64(usedMemory(b, rdb)-before)/numbers, "bytes/number")
				for n := range numbers {
					rdb.Del(ctx, keys.RecipientSends(cl, fmt.Sprintf("+3361%07d", n)))
				}
			}
		})
	}
}

// BenchmarkTraceMemory measures a deferral's trace (keys.Deferred's
// Trace): the bytes per deferred message it adds, by used_memory as
// 20,000 traces of UUID-long ids are deleted.
//
//	go test -run '^$' -bench TraceMemory -benchtime 1x ./deferral/
func BenchmarkTraceMemory(b *testing.B) {
	const messages = 20000
	rdb := redistest.Client(b)
	ctx := context.Background()
	for b.Loop() {
		cl := "mem" + fmt.Sprint(time.Now().UnixNano())
		s := New(rdb, nil, nil)
		rules := policy.Sending{Window: fixedWindow(time.Now().Add(time.Hour))}
		var ids []string
		for n := range messages {
			id := fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
			if j, err := s.Judge(ctx, msg(cl, id, "+33612345678"), rules); err != nil || j.Verdict != Deferred {
				b.Fatal(j, err)
			}
			ids = append(ids, id)
		}
		before := usedMemory(b, rdb)
		for _, id := range ids {
			rdb.Del(ctx, keys.DeferredOf(cl).Trace(id))
		}
		b.ReportMetric(float64(before-usedMemory(b, rdb))/messages, "bytes/trace")
		if _, err := s.RemoveAll(ctx, cl, "", ids); err != nil {
			b.Fatal(err)
		}
	}
}
