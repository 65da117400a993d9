package loadharness

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"smsdispatcher/provider/providertest"
)

// syntheticBacklog is a log and the simulator's arrivals of a 10 s after
// row (ramp-up 1 s): OTP at 10/s, each sent 10 ms after its publishing
// but those of slow (by index), sent after theirs, and one 429 at
// throttleAt; marketing at 50/s.
func syntheticBacklog(slow map[int]time.Duration, throttleAt time.Time) (classesSpec, *classesLog, []providertest.Arrival) {
	s := classesSpec{code: codeAfter, duration: 10 * time.Second, rampUp: time.Second, backlog: 1000, otpRate: 10, limit: backlogLimit}
	lg := newClassesLog()
	lg.backlogAt, lg.start, lg.end, lg.drained = t0.Add(-time.Second), t0, t10, t10.Add(time.Second)
	var arrivals []providertest.Arrival
	for i := range 100 {
		id := fmt.Sprintf("%s%d", otpIDPrefix, i)
		pub := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		lg.published[id] = pub
		w := 10 * time.Millisecond
		if d, ok := slow[i]; ok {
			w = d
		}
		arrivals = append(arrivals, accepted(id, pub.Add(w)))
		lg.otpSteps[id] = otpSteps{received: pub.Add(w / 2), admitted: pub.Add(w * 3 / 4)}
	}
	for i := range 500 {
		arrivals = append(arrivals, accepted(fmt.Sprintf("%s%d", marketingIDPrefix, i), t0.Add(time.Duration(i)*20*time.Millisecond)))
	}
	arrivals = append(arrivals, providertest.Arrival{At: throttleAt, ID: marketingIDPrefix + "x", Status: 429, Outcome: "throttled"})
	return s, lg, arrivals
}

// TestMeasureBacklogRow: the OTPs a 429's Retry-After delays are left out
// of the clear figures, those of the ramp-up too; the slow OTPs clear of
// it are listed in order of publishing with where their wait went, and
// fail the after row.
func TestMeasureBacklogRow(t *testing.T) {
	throttle := t0.Add(5 * time.Second)
	slow := map[int]time.Duration{
		3:  time.Second,             // in the ramp-up
		49: 1500 * time.Millisecond, // waits into the Retry-After
		55: 300 * time.Millisecond,  // published in it
		70: 2 * time.Second,         // clear of it: the stall
		71: 1900 * time.Millisecond,
	}
	s, lg, arrivals := syntheticBacklog(slow, throttle)
	r := measureBacklog(s, lg, arrivals)
	if r.Published != 100 || r.Sent != 100 || r.Max.Duration != 2*time.Second {
		t.Errorf("OTPs %d sent of %d, max %v: want 100 of 100, 2s", r.Sent, r.Published, r.Max)
	}
	// Clear: 90 after the ramp-up, less 49 and the 10 published 5.0–5.9 s.
	if r.Clear != 79 || r.ClearMax.Duration != 2*time.Second || r.ClearP50.Duration != 10*time.Millisecond {
		t.Errorf("clear %d, p50 %v, max %v: want 79, 10ms, 2s", r.Clear, r.ClearP50, r.ClearMax)
	}
	if r.SlowCount != 2 || len(r.Slow) != 2 || r.Slow[0].At != 7*time.Second || r.Slow[1].At != 7100*time.Millisecond ||
		r.Slow[0].Pull != time.Second || r.Slow[0].Slot != 500*time.Millisecond {
		t.Errorf("slow %+v (%d): want the OTPs of 7.0 s (pull 1s, slot 500ms) and 7.1 s", r.Slow, r.SlowCount)
	}
	if r.Throttled != 1 || r.LastThrottle != 5*time.Second || r.MarketingRate != 50 {
		t.Errorf("429s %d, last %v, marketing %.1f/s: want 1, 5s, 50/s", r.Throttled, r.LastThrottle, r.MarketingRate)
	}
	if len(r.Failures) != 1 || !errors.Is(backlogVerdict([]*backlogRow{r}), errScenarioFailed) {
		t.Errorf("failures %q: want the p99's", r.Failures)
	}

	// Without the stall the after row passes; a before row is not judged.
	delete(slow, 70)
	delete(slow, 71)
	s, lg, arrivals = syntheticBacklog(slow, throttle)
	if r := measureBacklog(s, lg, arrivals); len(r.Failures) != 0 || r.SlowCount != 0 {
		t.Errorf("no stall: failures %q, %d slow; want none", r.Failures, r.SlowCount)
	}
	s.code = codeBefore
	if r := measureBacklog(s, lg, arrivals); len(r.Failures) != 0 {
		t.Errorf("a before row judged: %q", r.Failures)
	}
}

// TestParseBacklog: --scenario backlog takes its defaults, --duration,
// --otp-rate and --code, and refuses the flags of the other scenarios.
func TestParseBacklog(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "backlog"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	specs := backlogSpecs(c)
	if !c.backlogRun || len(specs) != 2 || specs[0].duration != backlogDuration || specs[0].otpRate != backlogOTPRate ||
		!specs[0].pings || specs[1].pings || !specs[1].adaptive || specs[1].limit != backlogLimit || specs[1].trxRate != 0 {
		t.Fatalf("defaults: %+v", specs)
	}
	c, err = ParseMatrix([]string{"--scenario", "backlog", "--code", "after", "--duration", "2m", "--otp-rate", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if specs := backlogSpecs(c); len(specs) != 1 || specs[0].duration != 2*time.Minute || specs[0].otpRate != 5 {
		t.Errorf("--code after --duration 2m --otp-rate 5: %+v", specs)
	}
	for _, args := range [][]string{{"--target-rps", "80"}, {"--duration", "5s"}, {"--otp-rate", "0"}} {
		if _, err := ParseMatrix(append([]string{"--scenario", "backlog"}, args...), io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
