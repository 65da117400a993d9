package loadharness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestDeferredTallyCountsEachIdOnce: the tally counts the row's ids by
// their first publish; a second publish, an id of no row, unreadable data
// and a publish to another topic are each counted apart, and the ids
// never published are lost.
func TestDeferredTallyCountsEachIdOnce(t *testing.T) {
	tally := newDeferredTally("run-", "topic", 5)
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tally.begin(start)
	msg := func(id string) *pubsubpb.PubsubMessage {
		return &pubsubpb.PubsubMessage{Data: []byte(`{"id":"` + id + `","to":"+33612345678"}`)}
	}
	tally.record(&pubsubpb.PublishRequest{Topic: "topic", Messages: []*pubsubpb.PubsubMessage{
		msg(tally.id(0)), msg(tally.id(1)), msg(tally.id(1)), msg("other-000000003"), msg("run-5"), msg("run-3"),
		{Data: []byte("not json")},
	}}, start.Add(100*time.Millisecond))
	tally.record(&pubsubpb.PublishRequest{Topic: "elsewhere", Messages: []*pubsubpb.PubsubMessage{msg(tally.id(2))}}, start.Add(time.Second))
	if tally.complete() {
		t.Fatal("complete with 3 of 5 ids never published")
	}
	tally.record(&pubsubpb.PublishRequest{Topic: "topic", Messages: []*pubsubpb.PubsubMessage{msg(tally.id(3)), msg(tally.id(1))}},
		start.Add(2500*time.Millisecond))
	got := tally.sum()
	want := tallySum{Published: 5, Distinct: 3, Twice: 1, Extra: 2, Lost: 2, Strays: 4, WrongTopic: 1, Last: 2500 * time.Millisecond, Peak: 2, Gap: 1, FirstExtra: 100 * time.Millisecond}
	if got != want {
		t.Errorf("sum = %+v, want %+v", got, want)
	}
	r := &deferredRow{Spec: deferredSpec{code: codeAfter, messages: 5}, Tally: got, Left: 3}
	r.Failures = deferredJudge(r)
	if len(r.Failures) != 4 {
		t.Errorf("failures %q, want lost, twice, strays and left", r.Failures)
	}
	if err := deferredVerdict([]*deferredRow{{Tally: tallySum{Distinct: 5}}, r}); !errors.Is(err, errScenarioFailed) {
		t.Errorf("verdict %v, want errScenarioFailed", err)
	}
}

// TestDeferredRows: --release-spread × --code, before at 0s only; the
// scenario's flags need it.
func TestDeferredRows(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "deferred", "--messages", "50", "--release-spread", "0s,2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []deferredSpec{{codeBefore, 0, 50}, {codeAfter, 0, 50}, {codeAfter, 2 * time.Second, 50}}
	if !slices.Equal(c.deferredSpecs, want) {
		t.Errorf("rows %+v, want %+v", c.deferredSpecs, want)
	}
	for _, args := range [][]string{
		{"--messages", "10"},
		{"--scenario", "senders", "--release-spread", "0s"},
		{"--scenario", "deferred", "--code", "before", "--release-spread", "1m"},
		{"--scenario", "deferred", "--messages", "0"},
		{"--scenario", "deferred", "--release-spread", "-1s"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) took it", args)
		}
	}
}

// TestScenarioDeferred runs the scenario's rows on 600 messages at
// release spreads 0 and 1 s, on a Redis of its own (a row resets its
// statistics): every message is published once, nothing is left, and
// the after row's release costs one script call a page where the before
// row's costs one a message.
func TestScenarioDeferred(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "deferred", "--messages", "600", "--release-spread", "0s,1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := redis.ParseURL("unix://" + redistest.Private(t))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := runDeferredRows(context.Background(), cfg, opts, tlog{t})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := writeDeferredTable(&table, cfg, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if err := deferredVerdict(rows); err != nil {
		t.Error(err)
	}
	for _, r := range rows {
		if r.Tally.Published != 600 || r.bytesPerMessage() <= 0 {
			t.Errorf("%s %v: published %d, %.0f B a message stored", r.Spec.code, r.Spec.spread, r.Tally.Published, r.bytesPerMessage())
		}
	}
	before, after := rows[0], rows[1]
	if before.Scripts < 600 || after.Scripts*4 > before.Scripts {
		t.Errorf("script calls of the release: before %d, after %d; want a remove a message before, a quarter of that at most after", before.Scripts, after.Scripts)
	}
	if !strings.Contains(table.String(), "commands/msg") {
		t.Errorf("table without its columns:\n%s", table.String())
	}
}
