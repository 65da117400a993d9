package loadharness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/receipts"
)

// TestScenarioReceipts: the receipts scenario at 300 receipts a second for
// 2 s, on a Redis of its own (the scenario resets its statistics), the
// forged receipts' retries 100 ms apart, the sends planned at 300/s. Every
// final state a genuine receipt gave is in Redis and on the status topic,
// no forged receipt is taken though some are posted, duplicates are
// answered as such, and a verified receipt costs at most 1.05 Redis calls,
// the owed events' flushes included.
func TestScenarioReceipts(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "receipts", "--duration", "2s", "--receipt-rate", "300", "--redis-timeout", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := receiptsSpec{rate: cfg.receiptRate, duration: cfg.receiptsDuration, instances: receiptsInstances, retryDelay: 100 * time.Millisecond, sendRate: 300}
	r, err := runReceipts(context.Background(), cfg, "unix://"+redistest.Private(t), s, tlog{t})
	if err != nil {
		t.Fatalf("runReceipts: %v", err)
	}
	var table bytes.Buffer
	if err := writeReceiptsTable(&table, cfg, []*receiptsRow{r}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if r.Lost != 0 || r.ForgedAccepted != 0 || r.GenuineRefused != 0 || r.Resends != 0 || len(r.Failures) != 0 {
		t.Errorf("lost %d, forged accepted %d, genuine refused %d, resends %d, failures %q; want none",
			r.Lost, r.ForgedAccepted, r.GenuineRefused, r.Resends, r.Failures)
	}
	if r.Finals == 0 || r.Finals+r.NoFinal != r.Messages || r.Events < r.Finals-r.OwedLeft {
		t.Errorf("finals %d, without a genuine one %d, events %d, owed %d, of %d messages: want every message's final", r.Finals, r.NoFinal, r.Events, r.OwedLeft, r.Messages)
	}
	if r.ForgedPosted == 0 || r.Outcomes[receipts.OutcomeForged] < r.ForgedPosted || r.Outcomes[receipts.OutcomeDuplicate] == 0 {
		t.Errorf("forged posted %d, outcomes %v: want forged ones refused, duplicates answered", r.ForgedPosted, r.Outcomes)
	}
	if r.Verified == 0 || r.CallsPerReceipt < 0.9 || r.CallsPerReceipt > receiptsMaxCalls {
		t.Errorf("%d verified receipts, %.3f Redis calls each: want about 1, at most %.2f", r.Verified, r.CallsPerReceipt, receiptsMaxCalls)
	}
	if r.P50 <= 0 || r.P99 < r.P50 {
		t.Errorf("handling p50 %v, p99 %v", r.P50, r.P99)
	}
}

// TestJudgeReceipts: each of the criterion's parts fails the row alone.
func TestJudgeReceipts(t *testing.T) {
	good := receiptsRow{Finals: 10, Verified: 100, CallsPerReceipt: 1.01}
	if f := judgeReceipts(&good); len(f) != 0 || receiptsVerdict(&good) != nil {
		t.Fatalf("a good row judged: %q", f)
	}
	for name, edit := range map[string]func(*receiptsRow){
		"lost":            func(r *receiptsRow) { r.Lost = 1 },
		"forged accepted": func(r *receiptsRow) { r.ForgedAccepted = 1 },
		"genuine refused": func(r *receiptsRow) { r.GenuineRefused = 1 },
		"resends":         func(r *receiptsRow) { r.Resends = 1 },
		"calls":           func(r *receiptsRow) { r.CallsPerReceipt = 1.06 },
		"nothing":         func(r *receiptsRow) { r.Verified, r.CallsPerReceipt = 0, 0 },
	} {
		r := good
		edit(&r)
		r.Failures = judgeReceipts(&r)
		if len(r.Failures) != 1 || !errors.Is(receiptsVerdict(&r), errScenarioFailed) {
			t.Errorf("%s: failures %q", name, r.Failures)
		}
	}
}

func TestParseFlagsReceipts(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "receipts"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.receipts || len(c.scenarios) != 0 || c.receiptRate != receiptsRate || c.receiptsDuration != receiptsDuration {
		t.Errorf("--scenario receipts: receipts %v, other rows %d, rate %v, duration %v; want true, 0, the defaults", c.receipts, len(c.scenarios), c.receiptRate, c.receiptsDuration)
	}
	c, err = ParseMatrix([]string{"--scenario", "receipts", "--duration", "5s", "--receipt-rate", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s := (receiptsSpec{rate: c.receiptRate, duration: c.receiptsDuration}); s.messages() != 75 {
		t.Errorf("50/s for 5s: %d messages, want 75 (250 receipts at %.2f a message)", s.messages(), receiptsPerMessage)
	}
	for _, args := range [][]string{
		{"--receipt-rate", "10"},
		{"--scenario", "senders", "--receipt-rate", "10"},
		{"--scenario", "receipts", "--receipt-rate", "0"},
		{"--scenario", "receipts", "--duration", "100ms"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) accepted a bad command line", args)
		}
	}
	var b bytes.Buffer
	if err := writeReceiptsTable(&b, c, []*receiptsRow{{Messages: 3, Lost: 1, Failures: []string{"1 final states lost"}}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "FAIL") || !strings.Contains(b.String(), "receipts misses: 1 final states lost") {
		t.Errorf("table:\n%s", b.String())
	}
}
