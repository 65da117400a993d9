package loadharness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// The synthetic run of the failover tests: the storm from t10 to t25.
var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t10 = t0.Add(10 * time.Second)
	t25 = t0.Add(25 * time.Second)
)

func accepted(id string, at time.Time) providertest.Arrival {
	return providertest.Arrival{At: at, ID: id, Outcome: "accepted", Status: 200}
}

// syntheticFailover is a log of a run in which the OTPs published during
// the storm reach the backup after wait each, the primary takes OTP again
// failback after the storm's end, and the primary's requests drop from 80/s
// to 2/s during the storm.
func syntheticFailover(wait, failback time.Duration) *failoverLog {
	lg := newFailoverLog()
	lg.start, lg.stormStart, lg.stormEnd, lg.drained = t0, t10, t25, t25.Add(20*time.Second)
	for i := range 40 { // 10/s from t8 to t12
		id := fmt.Sprintf("%s%d", otpIDPrefix, i)
		pub := t0.Add(8*time.Second + time.Duration(i)*100*time.Millisecond)
		lg.otp[id] = pub
		at := pub.Add(10 * time.Millisecond)
		if !pub.Before(t10) {
			at = pub.Add(wait)
			lg.backup = append(lg.backup, accepted(id, at))
		} else {
			lg.primary = append(lg.primary, accepted(id, at))
		}
		lg.Observe(dispatch.Event{ID: id, Outcome: nack.Sent, Action: nack.Ack})
		lg.acked[id] = true
	}
	lg.primary = append(lg.primary, accepted(otpIDPrefix+"late", t25.Add(failback)))
	for at := t0.Add(failoverRampUp); at.Before(t10); at = at.Add(time.Second / 80) {
		lg.primaryRequests = append(lg.primaryRequests, at)
	}
	for at := t10; at.Before(t25); at = at.Add(time.Second / 2) {
		lg.primaryRequests = append(lg.primaryRequests, at)
	}
	return lg
}

func TestMeasureFailoverRow(t *testing.T) {
	lg := syntheticFailover(300*time.Millisecond, time.Second)
	r := measureFailover(failoverSpec{code: codeAfter, kind: storm503, sendTimeout: 2 * time.Second}, lg)
	if r.StormOTP != 20 || r.InStorm != 20 || r.Share != 1 || r.OTPOnBackup != 20 {
		t.Errorf("storm OTPs %d, in storm %d (%.2f), on backup %d; want 20, 20 (1), 20", r.StormOTP, r.InStorm, r.Share, r.OTPOnBackup)
	}
	if r.P50.Duration != 300*time.Millisecond || r.P99.Duration != 300*time.Millisecond || r.P99.censored {
		t.Errorf("p50 %v, p99 %v; want 300ms each", r.P50, r.P99)
	}
	if r.PrimaryBefore != 80 || r.PrimaryStorm != 2 || r.Ratio != 2.0/80 {
		t.Errorf("primary req/s before %v, during %v, ratio %v; want 80, 2, 0.025", r.PrimaryBefore, r.PrimaryStorm, r.Ratio)
	}
	if r.Failback == nil || *r.Failback != time.Second {
		t.Errorf("failback %s, want 1s", failbackText(r.Failback))
	}
	if r.Lost != 0 || r.Pending != 0 || r.Expired != 0 || r.MarketingOnBackup != 0 || len(r.Failures) != 0 {
		t.Errorf("lost %d, pending %d, expired %d, marketing on backup %d, failures %q; want none",
			r.Lost, r.Pending, r.Expired, r.MarketingOnBackup, r.Failures)
	}
}

// TestMeasureFailoverCountsWhatWentWrong: an OTP never accepted is a
// censored wait and, acked, lost; one expired is not lost; marketing on
// the backup, a late failback and a slow storm all fail an after row.
func TestMeasureFailoverCountsWhatWentWrong(t *testing.T) {
	lg := syntheticFailover(3*time.Second, 6*time.Second)
	lg.otp["otp-lost"], lg.acked["otp-lost"] = t10.Add(time.Second), true
	lg.Observe(dispatch.Event{ID: "otp-lost", Outcome: nack.Sent, Action: nack.Ack}) // acked, never at a provider
	lg.otp["otp-expired"], lg.acked["otp-expired"] = t10.Add(2*time.Second), true
	lg.Observe(dispatch.Event{ID: "otp-expired", Outcome: nack.Expired, Action: nack.Ack})
	lg.otp["otp-open"] = t10.Add(3 * time.Second)
	lg.Observe(dispatch.Event{ID: "otp-open", Outcome: nack.Transient, Action: nack.Nack})
	lg.backup = append(lg.backup, accepted(marketingIDPrefix+"1", t10), accepted("otp-10", t25.Add(time.Second)))

	r := measureFailover(failoverSpec{code: codeAfter, kind: stormHang}, lg)
	if r.StormOTP != 23 || r.InStorm != 20 || r.Lost != 1 || r.Expired != 1 || r.Pending != 1 || r.MarketingOnBackup != 1 || r.Duplicates != 1 {
		t.Errorf("storm OTPs %d, in storm %d, lost %d, expired %d, pending %d, marketing on backup %d, sent twice %d; want 23, 20, 1, 1, 1, 1, 1",
			r.StormOTP, r.InStorm, r.Lost, r.Expired, r.Pending, r.MarketingOnBackup, r.Duplicates)
	}
	if !r.P99.censored {
		t.Errorf("p99 %s: want a lower bound, three storm OTPs were never accepted", waitText(r.P99))
	}
	if len(r.Failures) != 5 { // p99, share, marketing on backup, failback, lost
		t.Errorf("failures %q, want 5", r.Failures)
	}
	if err := failoverVerdict([]*failoverRow{r}); !errors.Is(err, errScenarioFailed) {
		t.Errorf("verdict %v, want errScenarioFailed", err)
	}

	before := measureFailover(failoverSpec{code: codeBefore, kind: stormHang}, lg)
	if len(before.Failures) != 0 || failoverVerdict([]*failoverRow{before}) != nil {
		t.Errorf("a before row was judged: %q", before.Failures)
	}
}

func TestWriteFailoverTable(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "failover"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows := []*failoverRow{
		measureFailover(failoverSpec{code: codeBefore, kind: storm503, sendTimeout: cfg.sendTimeout}, syntheticFailover(9*time.Second, 0)),
		measureFailover(failoverSpec{code: codeAfter, kind: storm503, sendTimeout: cfg.sendTimeout}, syntheticFailover(20*time.Millisecond, time.Second)),
	}
	var b bytes.Buffer
	if err := writeFailoverTable(&b, cfg, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 4 || !strings.Contains(lines[2], "before") || !strings.HasSuffix(strings.TrimSpace(lines[2]), "-") ||
		!strings.Contains(lines[3], "after") || !strings.HasSuffix(strings.TrimSpace(lines[3]), "ok") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestParseFlagsFailover(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "failover,senders"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	specs := failoverSpecs(c)
	if !c.failover || len(c.scenarios) != 1 || len(specs) != 4 {
		t.Fatalf("--scenario failover,senders: failover %v, other scenarios %d, failover rows %d; want true, 1, 4", c.failover, len(c.scenarios), len(specs))
	}
	if s := specs[0]; s.code != codeBefore || s.kind != storm503 || s.storm != failoverStorm || s.sendTimeout != failoverSendTimeout ||
		s.otpRate != failoverOTPRate || s.instances != failoverInstances || s.healthRule() == (admission.HealthRule{}) {
		t.Errorf("first row %+v, rule %+v: want before, 503, the defaults, the rule off", s, s.healthRule())
	}
	if s := specs[3]; s.code != codeAfter || s.kind != stormHang || s.healthRule() != (admission.HealthRule{}) {
		t.Errorf("last row %+v: want after, hang, the rule's defaults", s)
	}

	c, err = ParseMatrix([]string{"--scenario", "failover", "--code", "after", "--storm", "hang", "--storm-length", "5s", "--send-timeout", "1s", "--otp-rate", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if specs := failoverSpecs(c); len(specs) != 1 || specs[0].storm != 5*time.Second || specs[0].sendTimeout != time.Second || specs[0].otpRate != 5 {
		t.Errorf("flags given: %+v", specs)
	}

	for _, args := range [][]string{
		{"--scenario", "failover", "--code", "now"},
		{"--scenario", "failover", "--storm", "429"},
		{"--scenario", "failover", "--duration", "5s"},
		{"--scenario", "failover", "--senders", "2"},
		{"--scenario", "failover", "--storm-length", "0s"},
		{"--scenario", "failover", "--send-timeout", "2m"},
		{"--scenario", "senders", "--storm", "hang"},
		{"--send-timeout", "1s"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) accepted a bad command line", args)
		}
	}
}
