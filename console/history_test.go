package console

import (
	"strings"
	"testing"
	"time"

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
	return status.Report{Time: now, Accounts: []status.Account{account(nil), account(&status.Penalty{Reason: "429"})}}
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
	v := h.view(now.Add(2*time.Second), []string{"otp", "marketing"}, 100)
	want := 2 * (3 + 4 + 5 + 6 + 7)
	if len(v.Last60s) != 2 || v.Last60s[0] != (classCount{Class: "otp"}) || v.Last60s[1] != (classCount{Class: "marketing", Units: want}) {
		t.Errorf("last 60 s: %+v, want otp 0, marketing %d", v.Last60s, want)
	}
	if v.Readings != 2 || v.Series[1].Ratio != "100.0 %" || len(v.Throttled) != 2 {
		t.Errorf("readings %d, ratio %q, 429 ticks %v: want 2, 100.0 %%, two ticks", v.Readings, v.Series[1].Ratio, v.Throttled)
	}
	if v.Contract != 100 || v.ContractY >= chartHeight || v.ContractY <= 0 {
		t.Errorf("contract line at %d for %g/s", v.ContractY, v.Contract)
	}
	points := strings.Fields(v.Series[1].Sent)
	if len(points) != chartBuckets || strings.HasSuffix(points[len(points)-1], ",180") {
		t.Errorf("marketing's line: %d points, last %s: want the last bucket above the axis", len(points), points[len(points)-1])
	}
	later := h.view(now.Add(chartSpan+time.Minute), []string{"marketing"}, 100)
	if later.Last60s[0].Units != 0 || strings.Count(later.Series[0].Sent, ",180 ") != len(points) {
		t.Errorf("an hour later the chart still shows the sends: %+v", later)
	}
	h.add(reportAt(now.Add(chartSpan+time.Minute), nil, 0))
	if len(h.sent) != 0 || len(h.delivered) != 1 {
		t.Errorf("an hour later the history keeps %d seconds and %d readings, want 0 and 1", len(h.sent), len(h.delivered))
	}
}
