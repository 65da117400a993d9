package loadharness

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

// TestRecipientsPutOneInFiftyOnTheList: the traffic's recipients are 2 %
// numbers of the list, each a number the list can hold, spread over it,
// and the others off it.
func TestRecipientsPutOneInFiftyOnTheList(t *testing.T) {
	const size = 1000
	list := map[string]bool{}
	for i := range size {
		list[listedNumber(i)] = true
	}
	listed, distinct := 0, map[string]bool{}
	for n := range 5000 {
		to, onList := recipientOf(n, size)
		if _, err := suppress.Key(to); err != nil {
			t.Fatalf("recipient %d: %v", n, err)
		}
		if onList != list[to] {
			t.Fatalf("recipient %d (%s): listed %v, on the list %v", n, to, onList, list[to])
		}
		if onList {
			listed++
			distinct[to] = true
		}
	}
	if listed != 100 || len(distinct) < 90 {
		t.Errorf("%d listed recipients of 5000 (%d numbers), want 100 spread over the list", listed, len(distinct))
	}
}

// syntheticSuppressions is a row's traffic of 100 messages, 2 to listed
// numbers (m0 and m50), and its ends and arrivals: each listed one
// suppressed unless sendListed, every other one sent; scripts script
// calls in all.
func syntheticSuppressions(sendListed bool, scripts int64) (*suppressionsTraffic, map[string]dispatch.Event, []providertest.Arrival, redisCost) {
	tr := &suppressionsTraffic{listed: map[string]bool{}}
	ends := map[string]dispatch.Event{}
	var arrivals []providertest.Arrival
	for i := range 100 {
		id := fmt.Sprintf("m%d", i)
		tr.listed[id] = i%suppressEvery == 0
		tr.mkt = append(tr.mkt, id)
		if tr.listed[id] && !sendListed {
			ends[id] = dispatch.Event{ID: id, Class: admission.Marketing, Outcome: nack.Suppressed}
			continue
		}
		ends[id] = dispatch.Event{ID: id, Class: admission.Marketing, Outcome: nack.Sent}
		arrivals = append(arrivals, providertest.Arrival{ID: id, Outcome: "accepted"})
	}
	return tr, ends, arrivals, redisCost{scripts: scripts, executed: 8 * scripts, ops: map[string]int64{admission.OpAdmit: 98}}
}

// TestSuppressionsCriterion: the row with a list passes when no listed
// number was sent, each was suppressed and the script calls per sent
// message are within 2.05; a listed number sent, or more calls, fail it;
// the row without a list is held to nothing.
func TestSuppressionsCriterion(t *testing.T) {
	tr, ends, arrivals, cost := syntheticSuppressions(false, 200)
	r := measureSuppressions(1000, tr, ends, nil, arrivals, cost)
	if len(r.Failures) != 0 || r.Sent != 98 || r.Suppressed != 2 || r.ToListed != 2 || r.SentListed != 0 {
		t.Errorf("a clean row: sent %d, suppressed %d of %d, sent to listed %d, failures %q", r.Sent, r.Suppressed, r.ToListed, r.SentListed, r.Failures)
	}
	var table bytes.Buffer
	if err := writeSuppressionsTable(&table, &Config{suppressionsOTPRate: 5}, []*suppressionsRow{r}); err != nil || !strings.Contains(table.String(), " ok") {
		t.Errorf("table (%v):\n%s", err, table.String())
	}

	tr, ends, arrivals, cost = syntheticSuppressions(false, 210)
	if r := measureSuppressions(1000, tr, ends, nil, arrivals, cost); len(r.Failures) != 1 || !strings.Contains(r.Failures[0], "script calls") {
		t.Errorf("2.14 script calls a sent message: failures %q, want the calls'", r.Failures)
	}
	// The heartbeats are no message's: 2.14 calls a sent message of
	// which 0.10 are heartbeats pass.
	cost.ops[status.OpHeartbeat] = 10
	if r := measureSuppressions(1000, tr, ends, nil, arrivals, cost); len(r.Failures) != 0 || r.PathScriptsPerSent != 200.0/98 {
		t.Errorf("2.14 script calls a sent message, 0.10 of them heartbeats: %.3f on the path, failures %q, want 2.04 and none", r.PathScriptsPerSent, r.Failures)
	}
	tr, ends, arrivals, cost = syntheticSuppressions(true, 200)
	r = measureSuppressions(1000, tr, ends, nil, arrivals, cost)
	if r.SentListed != 2 || len(r.Failures) != 2 {
		t.Errorf("listed numbers sent: sent to listed %d, failures %q, want 2 and the sends' and suppressions' failures", r.SentListed, r.Failures)
	}
	if err := suppressionsVerdict([]*suppressionsRow{r}); err == nil {
		t.Error("the verdict of a failed row is nil")
	}
	if r := measureSuppressions(0, tr, ends, nil, arrivals, cost); len(r.Failures) != 0 {
		t.Errorf("the row without a list: failures %q, want none", r.Failures)
	}
}

// TestSuppressionsFlags: --list-size belongs to the scenario.
func TestSuppressionsFlags(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "suppressions", "--list-size", "5000", "--otp-rate", "2"}, io.Discard)
	if err != nil || !cfg.suppressionsRun || cfg.listSize != 5000 || cfg.suppressionsOTPRate != 2 {
		t.Fatalf("ParseMatrix: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{
		{"--scenario", "senders", "--list-size", "5"},
		{"--scenario", "suppressions", "--list-size", "0"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}
