package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestTheDemosGuardCountsEveryOTPAndBlocksNothing runs the demo with
// --guard on a real Redis: every OTP sent is counted in the guard's ranges,
// about 80 % of the codes are verified, nothing legitimate is blocked, and
// the clients count the guard's calls apart (the report's cost line).
func TestTheDemosGuardCountsEveryOTPAndBlocksNothing(t *testing.T) {
	cfg := onPrivateRedis(t)
	r, err := Run(context.Background(), cfg, Options{Instances: 2, Campaign: 400, OTPRate: 20, Timeout: 2 * time.Minute, Guard: true})
	if err != nil {
		t.Fatal(err)
	}
	g := r.Guard
	if g == nil {
		t.Fatal("no guard figures with Options.Guard")
	}
	if g.CountErr != "" || g.OTPs == 0 || g.Counted != g.OTPs {
		t.Errorf("OTPs sent %d, counted by the guard %d (%s); want every one", g.OTPs, g.Counted, g.CountErr)
	}
	if n := total(g.Blocked); n != 0 {
		t.Errorf("the guard blocked %d legitimate messages: %v", n, g.Blocked)
	}
	if g.Verified < g.OTPs/2 {
		t.Errorf("%d codes verified of %d OTPs; want about 80 %%", g.Verified, g.OTPs)
	}
	if g.SentCalls == 0 {
		t.Errorf("no guard-sent call counted by the clients for %d sends", g.Sends)
	}
	var out bytes.Buffer
	r.Print(&out, cfg)
	if !strings.Contains(out.String(), "guard (--guard)") {
		t.Errorf("the report has no guard line:\n%s", out.String())
	}
}
