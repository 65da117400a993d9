package loadharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// TestScenarioClasses runs the classes scenario's after row for 2 s at
// higher rates (OTP and transactional 20/s each, a backlog of 300) on a
// Redis of its own (the run resets its statistics): three dispatchers
// with three lanes send every class, every OTP and transactional message
// is sent by the end, no 429, and about two script calls per send.
func TestScenarioClasses(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "classes", "--code", "after", "--duration", "2s", "--redis-timeout", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := classesSpecs(cfg)[0]
	s.backlog, s.otpRate, s.trxRate, s.rampUp = 300, 20, 20, 500*time.Millisecond
	r, err := runClasses(context.Background(), cfg, "unix://"+redistest.Private(t), s, tlog{t})
	if err != nil {
		t.Fatalf("runClasses: %v", err)
	}
	var table bytes.Buffer
	if err := writeClassesTable(&table, cfg, []*classesRow{r}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if r.Throttled != 0 {
		t.Errorf("%d answers of 429, want none", r.Throttled)
	}
	for _, f := range r.Classes {
		if f.Sent == 0 || (f.Class != admission.Marketing && (f.Unsent != 0 || f.Published < 20)) {
			t.Errorf("%s: published %d, sent %d, unsent %d: want every class sent, every stream message", f.Class, f.Published, f.Sent, f.Unsent)
		}
	}
	if !r.HasStats || r.ScriptsPerSent < 1.5 || r.ScriptsPerSent > 2.5 {
		t.Errorf("script calls per send %.2f (statistics %v): want about 2", r.ScriptsPerSent, r.HasStats)
	}
}

// syntheticClasses is a log and the simulator's arrivals of a 10 s run
// (ramp-up 1 s): OTP at 5/s sent after otpWait, transactional at 10/s
// after trxWait, the marketing backlog at mktRate from the start.
func syntheticClasses(otpWait, trxWait time.Duration, mktRate int) (classesSpec, *classesLog, []providertest.Arrival) {
	s := classesSpec{code: codeAfter, duration: 10 * time.Second, rampUp: time.Second, backlog: 1000, otpRate: 5, trxRate: 10}
	lg := newClassesLog()
	lg.backlogAt, lg.start, lg.end, lg.drained = t0.Add(-time.Second), t0, t10, t10.Add(time.Second)
	var arrivals []providertest.Arrival
	stream := func(prefix string, rate int, wait time.Duration) {
		for i := range 10 * rate {
			id := fmt.Sprintf("%s%d", prefix, i)
			pub := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
			lg.published[id] = pub
			arrivals = append(arrivals, accepted(id, pub.Add(wait)))
		}
	}
	stream(otpIDPrefix, 5, otpWait)
	stream(trxIDPrefix, 10, trxWait)
	for i := range 10 * mktRate {
		arrivals = append(arrivals, accepted(fmt.Sprintf("%s%d", marketingIDPrefix, i), t0.Add(time.Duration(i)*time.Second/time.Duration(mktRate))))
	}
	return s, lg, arrivals
}

func TestMeasureClassesRow(t *testing.T) {
	s, lg, arrivals := syntheticClasses(10*time.Millisecond, 200*time.Millisecond, 60)
	r := measureClasses(s, lg, arrivals, 0, redisstats.CommandStats{"evalsha": 1460, "eval": 2, "hget": 100})
	otp, trx, mkt := r.figures(admission.OTP), r.figures(transactional), r.figures(admission.Marketing)
	if otp.Published != 50 || otp.Sent != 50 || otp.Unsent != 0 || otp.P99.Duration != 10*time.Millisecond || otp.P99.censored {
		t.Errorf("otp %+v: want 50 published and sent, p99 10ms", otp)
	}
	if trx.Published != 100 || trx.Sent != 100 || trx.P50.Duration != 200*time.Millisecond || trx.P99.Duration != 200*time.Millisecond {
		t.Errorf("transactional %+v: want 100 sent, p50 and p99 200ms", trx)
	}
	if mkt.Published != 1000 || mkt.Sent != 600 || mkt.Unsent != 400 || mkt.Rate != 60 || mkt.MaxIn1s != 60 {
		t.Errorf("marketing %+v: want 600 of 1000 sent, 60/s, 60 in 1 s", mkt)
	}
	if r.Sent != 750 || r.Span != 9*time.Second || r.MarketingWant != 60 {
		t.Errorf("sent %d over %v, marketing wanted %g: want 750, 9s, 60", r.Sent, r.Span, r.MarketingWant)
	}
	if !r.HasStats || r.ScriptsPerSent != 1462.0/750 || r.CommandsPerSent != 1562.0/750 {
		t.Errorf("per send %.3f scripts, %.3f commands: want %.3f, %.3f", r.ScriptsPerSent, r.CommandsPerSent, 1462.0/750, 1562.0/750)
	}
	if len(r.Failures) != 0 || classesVerdict([]*classesRow{r}) != nil {
		t.Errorf("failures %q, want none", r.Failures)
	}
}

// TestJudgeClasses: each part of the criterion fails the after row alone;
// a before row is not judged.
func TestJudgeClasses(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name             string
		otpWait, trxWait time.Duration
		mktRate          int
		throttled        int
		unsentTrx        bool
		want             string
	}{
		{name: "429", otpWait: ms, trxWait: ms, mktRate: 60, throttled: 1, want: "1 answers of 429"},
		{name: "slow transactional", otpWait: ms, trxWait: 600 * ms, mktRate: 60, want: "transactional p99 600.0ms"},
		{name: "transactional unsent", otpWait: ms, trxWait: ms, mktRate: 60, unsentTrx: true, want: "transactional p99 >"},
		{name: "slow OTP", otpWait: 60 * ms, trxWait: ms, mktRate: 60, want: "OTP p99 60.0ms"},
		{name: "marketing slow", otpWait: ms, trxWait: ms, mktRate: 58, want: "marketing 58.0/s"},
		{name: "marketing past its share", otpWait: ms, trxWait: ms, mktRate: 62, want: "marketing 62.0/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, lg, arrivals := syntheticClasses(tt.otpWait, tt.trxWait, tt.mktRate)
			if tt.unsentTrx { // two of 102: past the p99's rank
				lg.published[trxIDPrefix+"late"], lg.published[trxIDPrefix+"later"] = t10, t10
			}
			r := measureClasses(s, lg, arrivals, tt.throttled, nil)
			if len(r.Failures) != 1 || !strings.HasPrefix(r.Failures[0], tt.want) {
				t.Errorf("failures %q, want one starting %q", r.Failures, tt.want)
			}
			if err := classesVerdict([]*classesRow{r}); !errors.Is(err, errScenarioFailed) {
				t.Errorf("verdict %v, want errScenarioFailed", err)
			}
			s.code = codeBefore
			if before := measureClasses(s, lg, arrivals, tt.throttled, nil); len(before.Failures) != 0 {
				t.Errorf("a before row was judged: %q", before.Failures)
			}
		})
	}
}

func TestWriteClassesTable(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "classes"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, lg, arrivals := syntheticClasses(time.Millisecond, 45*time.Second, 70)
	s.code = codeBefore
	before := measureClasses(s, lg, arrivals, 0, nil)
	s, lg, arrivals = syntheticClasses(time.Millisecond, 20*time.Millisecond, 60)
	after := measureClasses(s, lg, arrivals, 0, nil)
	var b bytes.Buffer
	if err := writeClassesTable(&b, cfg, []*classesRow{before, after}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	tail := func(i int) string { // the last three cells of line i
		f := strings.Fields(lines[i])
		return strings.Join(f[max(0, len(f)-3):], " ")
	}
	// The header, then three classes and the whole row for each code.
	if len(lines) < 10 || !strings.Contains(lines[3], "transactional") || !strings.Contains(lines[3], "45.00s") ||
		tail(5) != "n/a n/a -" || !strings.HasSuffix(tail(9), "ok") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestParseFlagsClasses(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "classes"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	specs := classesSpecs(c)
	if !c.classes || c.failover || len(c.scenarios) != 0 || len(specs) != 2 || specs[0].code != codeBefore || specs[1].code != codeAfter {
		t.Fatalf("--scenario classes: classes %v, failover %v, other scenarios %d, rows %+v; want before and after alone", c.classes, c.failover, len(c.scenarios), specs)
	}
	if s := specs[1]; s.duration != classesDuration || s.rampUp != classesRampUp || s.backlog != classesBacklog || s.otpRate != classesOTPRate ||
		s.trxRate != classesTrxRate || s.instances != classesInstances {
		t.Errorf("after row %+v: want the scenario's defaults", s)
	}
	c, err = ParseMatrix([]string{"--scenario", "classes", "--code", "after", "--duration", "4s", "--otp-rate", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if specs := classesSpecs(c); len(specs) != 1 || specs[0].code != codeAfter || specs[0].duration != 4*time.Second || specs[0].rampUp != time.Second || specs[0].otpRate != 2 {
		t.Errorf("flags given: %+v", specs)
	}
	for _, args := range [][]string{
		{"--scenario", "classes", "--senders", "2"},
		{"--scenario", "classes", "--target-rps", "50"},
		{"--scenario", "classes", "--storm", "hang"},
		{"--scenario", "classes", "--otp-rate", "25"},
		{"--scenario", "classes", "--duration", "500ms"},
		{"--scenario", "senders", "--code", "after"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) accepted a bad command line", args)
		}
	}
}
