package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
)

// BenchmarkImportAMillionLines runs `dispatcher suppressions import` on
// a file of a million JSON lines (an export's shape), into an empty list
// on the test Redis, its mirror publishing every line to
// SUPPRESSIONS_TOPIC on an in-process pstest (docs/measurements.md, "A
// million suppressed numbers"). It reports the import's own time; the
// list's keys are deleted before and after. SMS_BENCH_KEEP_INSPECT=1
// keeps the topic's subscription sms-suppressions-inspect, which makes
// pstest, not the import, the cost (below).
//
//	go test -run '^$' -bench ImportAMillionLines -benchtime 1x ./cmd/dispatcher/
func BenchmarkImportAMillionLines(b *testing.B) {
	const lines = 1_000_000
	ps := pstest.NewServer()
	defer ps.Close()
	b.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	b.Setenv("PUBSUB_PROJECT_ID", "proj")
	b.Setenv("REDIS_URL", "redis://"+redistest.Addr(b))
	b.Setenv("SMS_ACCOUNT", redistest.UniqueAccount(b))
	b.Setenv("ACCOUNTS_FILE", "")
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		b.Fatalf("setup: %v", err)
	}
	if os.Getenv("SMS_BENCH_KEEP_INSPECT") == "" {
		// pstest goes through every message a subscription holds on each
		// of its ticks: with sms-suppressions-inspect, a million messages
		// cost the fake time growing with their square, which Pub/Sub
		// does not charge a publisher. The topic alone takes them.
		c, err := topology.NewClient(ctx, "proj", "")
		if err != nil {
			b.Fatal(err)
		}
		err = c.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: topology.SubscriptionName("proj", config.SuppressionsInspect)})
		c.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	file := filepath.Join(b.TempDir(), "million.jsonl")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	at := time.Date(2026, 12, 7, 6, 30, 0, 0, time.UTC)
	for i := range lines {
		fmt.Fprintf(w, `{"number":"+1415%07d","source":"inbound","account":"acme","reason":"replied STOP","at":%q}`+"\n", i, at.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	rdb := redistest.Client(b)
	n := keys.Suppress()
	clear := func() { rdb.Del(context.Background(), n.List(), n.Log(), n.Seq()) }
	for b.Loop() {
		b.StopTimer()
		clear()
		b.StartTimer()
		var out, errs bytes.Buffer
		if err := run(ctx, []string{"suppressions", "import", "--file", file}, &out, &errs); err != nil {
			b.Fatalf("import: %v\n%s", err, errs.String())
		}
		b.Log(out.String())
	}
	clear()
	b.ReportMetric(float64(lines), "lines/op")
}
