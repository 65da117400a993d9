package suppress

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
)

// BenchmarkMemoryPerNumber measures what one suppressed number costs: in
// Redis (MEMORY USAGE of the list's hash, and of the change log its
// import wrote, capped at LogCap), and in a process's List (the heap
// after Load, runtime.MemStats). A million numbers, imported as `dispatcher
// suppressions import` does; docs/measurements.md quotes its figures:
//
//	go test -run '^$' -bench MemoryPerNumber -benchtime 1x ./suppress/
func BenchmarkMemoryPerNumber(b *testing.B) {
	const count = 1_000_000
	rdb := redistest.Client(b)
	names := keys.Suppressions("{sms:suppress:bench}")
	ctx := context.Background()
	del := func() { rdb.Del(ctx, names.List(), names.Log(), names.Seq()) }
	del()
	b.Cleanup(del)
	store := NewStore(rdb, names, nil)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	batch := make([]Entry, 0, ImportBatch)
	start := time.Now()
	for i := range count {
		batch = append(batch, Entry{Number: fmt.Sprintf("+1%010d", 2_000_000_000+i*7), Source: SourceImport, Account: "acme-bulk", Reason: "STOP", At: at})
		if len(batch) == cap(batch) {
			if _, err := store.Import(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	imported := time.Since(start)
	hash, err := rdb.MemoryUsage(ctx, names.List(), 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	log, err := rdb.MemoryUsage(ctx, names.Log(), 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := NewList(store, nil)
	start = time.Now()
	for range b.N {
		if err := l.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
	loaded := time.Since(start) / time.Duration(b.N)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if l.Len() != count {
		b.Fatalf("loaded %d numbers, want %d", l.Len(), count)
	}
	b.ReportMetric(float64(hash)/count, "redis-list-B/number")
	b.ReportMetric(float64(log)/LogCap, "redis-log-B/change")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/count, "process-B/number")
	b.ReportMetric(imported.Seconds(), "import-s")
	b.ReportMetric(loaded.Seconds(), "load-s")
	runtime.KeepAlive(l)
}
