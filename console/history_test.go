package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
	"smsdispatcher/status"
)

// reportAt is a report at now of two accounts, each having sent perSecond
// of marketing in each of the last len(perSecond) seconds, one of them in
// a 429's penalty, with delivered of 10 finals.
func reportAt(now time.Time, perSecond []int, delivered int64) status.Report {
	ratio := float64(delivered) / 10
	account := func(p *status.Penalty) status.Account {
		return status.Account{ContractRPS: 50, Penalty: p,
			Sent:     map[string]*status.Sent{"marketing": {PerSecond: perSecond}},
			Delivery: map[string]*status.Delivery{"marketing": {Finals: 5, Delivered: delivered / 2, DeliveredRatio: &ratio}}}
	}
	a, b := account(nil), account(&status.Penalty{Reason: "429"})
	a.Name, b.Name = "a", "b"
	return status.Report{Time: now, Accounts: []status.Account{a, b}}
}

// TestHistory: the chart sums the accounts' sends second by second, a
// second read twice counts once (the later reading), the delivered ratio
// and the 429s are those of each reading, and an hour later it is all
// gone.
func TestHistory(t *testing.T) {
	h := newHistory()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h.add(reportAt(now, []int{1, 2, 3}, 8))
	// Two seconds later the same three seconds read again (more was
	// counted by then), and two more.
	h.add(reportAt(now.Add(2*time.Second), []int{3, 4, 5, 6, 7}, 10))
	v := h.view(now.Add(2*time.Second), []string{"otp", "marketing"}, []string{"a", "b"}, 100)
	want := 2 * (3 + 4 + 5 + 6 + 7)
	if len(v.Last60s) != 2 || v.Last60s[0] != (classCount{Class: "otp"}) || v.Last60s[1] != (classCount{Class: "marketing", Units: want}) {
		t.Errorf("last 60 s: %+v, want otp 0, marketing %d", v.Last60s, want)
	}
	if v.Readings != 2 || v.Series[1].Ratio != "100.0 %" || len(v.Penalties) != 2 || len(v.Penalties[0].X) != 0 || len(v.Penalties[1].X) == 0 {
		t.Errorf("readings %d, ratio %q, 429 ticks %+v: want 2, 100.0 %%, ticks on b's row alone", v.Readings, v.Series[1].Ratio, v.Penalties)
	}
	// The delivered ratio has its own scale: 100 % is the strip's top,
	// 80 % a fifth of its height down.
	if pts := strings.Fields(v.Series[1].Delivered); len(pts) != 2 || !strings.HasSuffix(pts[0], fmt.Sprintf(",%d", ratioHeight/5)) || !strings.HasSuffix(pts[1], ",0") {
		t.Errorf("marketing's delivered ratio at 80 %% then 100 %%: points %q, want y %d then 0", v.Series[1].Delivered, ratioHeight/5)
	}
	if v.Contract != 100 || v.ContractY >= chartHeight || v.ContractY <= 0 {
		t.Errorf("contract line at %d for %g/s", v.ContractY, v.Contract)
	}
	points := strings.Fields(v.Series[1].Sent)
	if len(points) != chartBuckets || strings.HasSuffix(points[len(points)-1], ",180") {
		t.Errorf("marketing's line: %d points, last %s: want the last bucket above the axis", len(points), points[len(points)-1])
	}
	later := h.view(now.Add(chartSpan+time.Minute), []string{"marketing"}, nil, 100)
	if later.Last60s[0].Units != 0 || strings.Count(later.Series[0].Sent, ",180 ") != len(points) {
		t.Errorf("an hour later the chart still shows the sends: %+v", later)
	}
	h.add(reportAt(now.Add(chartSpan+time.Minute), nil, 0))
	if len(h.sent) != 0 || len(h.delivered) != 1 {
		t.Errorf("an hour later the history keeps %d seconds and %d readings, want 0 and 1", len(h.sent), len(h.delivered))
	}
}

// TestTheSamplerReadsWhileNobodyLooks: the chart's readings go on with no
// page asked: sends and a 429 made while nobody looks show on the next
// /chart, the 429 on its account's row alone; Close stops the readings.
func TestTheSamplerReadsWhileNobodyLooks(t *testing.T) {
	h := newHarness(t, basicAuth(t, map[string]string{"vic": "viewer"}), Lists{})
	routing, err := h.cfg.Routing()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Client(t)
	setups, err := operator.Setups(rdb, h.cfg, routing.Accounts, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, lim := context.Background(), setups[0].Limiter
	for i := range 3 {
		id := fmt.Sprintf("unwatched-%d", i)
		d, err := lim.Admit(ctx, admission.OTP, 1, time.Second, admission.Claim{ID: id, Token: "t-" + id})
		if err != nil || !d.Allowed {
			t.Fatalf("admit %s: %+v %v", id, d, err)
		}
		if err := lim.Settle(ctx, d, ledger.SentRecord("p-"+id), admission.ResultNone, ledger.Story{ID: id, Class: "otp"}); err != nil {
			t.Fatalf("settle %s: %v", id, err)
		}
	}
	if err := lim.ReportThrottled(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	readings := func() int {
		h.h.chart.mu.Lock()
		defer h.h.chart.mu.Unlock()
		return h.h.chart.readings
	}
	start := readings()
	// A second is read once it is whole: wait for the readings of the
	// next two.
	waitFor(t, "readings after the sends, nobody looking", func() bool { return readings() >= start+9 })

	code, body := h.request("vic", "GET", "/chart", nil)
	if code != 200 || between(body, `class="sent-otp">`, "<") != "3" {
		t.Errorf("/chart after the unwatched sends: %d, want otp 3 sent\n%s", code, body)
	}
	row := between(body, `data-account="`+setups[0].Name+`"`, "</g>")
	if !strings.Contains(row, "<rect") || !strings.Contains(body, setups[0].Name+": 429") {
		t.Errorf("the 429 is not on its account's row:\n%s", body)
	}

	h.h.Close() // waits for the sampler to return; goleak (TestMain) finds it if it does not
}
