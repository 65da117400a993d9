package loadharness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// runScenarioTest parses args as the command line and runs its scenarios
// on the test Redis, returning the rows and the table.
func runScenarioTest(t *testing.T, args ...string) ([]*scenarioResult, string) {
	t.Helper()
	cfg, err := ParseMatrix(args, io.Discard)
	if err != nil {
		t.Fatalf("ParseMatrix(%q): %v", args, err)
	}
	rows, err := runScenarios(context.Background(), cfg, &redis.Options{Addr: redistest.Addr(t)}, tlog{t})
	if err != nil {
		t.Fatalf("runScenarios: %v", err)
	}
	var table bytes.Buffer
	if err := writeScenarioTable(&table, cfg, rows); err != nil {
		t.Fatalf("writeScenarioTable: %v", err)
	}
	t.Logf("\n%s", table.String())
	return rows, table.String()
}

// TestScenarioSendersUsesThePool: the senders scenario for 3 s. Every
// message goes from a sender of the pool (Decision.Sender), every sender
// carries some, and the row holds the window figures. Throttles are only
// logged: a loaded machine may spread arrivals by more than the 20 ms the
// limiter allows for.
func TestScenarioSendersUsesThePool(t *testing.T) {
	rows, table := runScenarioTest(t, "--scenario", "senders", "--duration", "3s", "--redis-timeout", "1s")
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	r := rows[0]
	if r.Accepted == 0 || r.AcceptedUnits < r.Accepted || r.Utilization <= 0 {
		t.Errorf("accepted %d messages, %d segments, utilization %.3f; want some, segments ≥ messages", r.Accepted, r.AcceptedUnits, r.Utilization)
	}
	if r.NoPool != 0 {
		t.Errorf("%d accepted messages came from no sender of the pool; each must go from its admission's Decision.Sender", r.NoPool)
	}
	if len(r.PerSender) != poolSenders {
		t.Fatalf("per-sender figures for %d senders, want %d", len(r.PerSender), poolSenders)
	}
	for from, n := range r.PerSender {
		if n == 0 {
			t.Errorf("sender %s carried nothing; the pool's first %d sends go one to each", from, poolSenders)
		}
	}
	if r.MaxSender1s < 1 || r.MaxSender1s > poolSenderLimit || r.MaxSenderFrom == "" {
		t.Errorf("busiest sender %q had %d segments in a second, want 1 to %d", r.MaxSenderFrom, r.MaxSender1s, poolSenderLimit)
	}
	if r.MaxAccount1s < r.MaxSender1s || r.MaxAccount1s > poolAccountLimit {
		t.Errorf("account's most in a second %d, want %d to %d", r.MaxAccount1s, r.MaxSender1s, poolAccountLimit)
	}
	t.Logf("throttles: account %d, sender %d", r.Throttled, r.SenderThrottled)
	for _, want := range []string{"util of 25", "sender 429s", "max sender 1s", "10/10", "start-up rule: TARGET_RPS × (1s + J) + BURST + MAX_SEGMENTS - 1 = 21.5 × (1s + 20ms) + 1 + 3 - 1 = 24.93"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestScenarioAdaptiveLearnsTheLimit: TARGET_RPS 90 on a provider allowing
// 60/s, with the search stepping every 1.5 s. The learned rate drops below
// 60 and the 429s stop. (A step shorter than the time a rate just above
// the limit takes to draw its 429, about the provider's 1 s window, proves
// rates the provider refuses.) Expected: cuts at about 0.7 s (to 63) and
// 2.7 s (to 44.1), steps up to 53.55, 58.28 and 60.64, whose 429 at about
// 9 s brings it back to 58.28, settled; the bound below leaves 3 s to
// spare.
func TestScenarioAdaptiveLearnsTheLimit(t *testing.T) {
	const d = 16 * time.Second
	rows, table := runScenarioTest(t, "--scenario", "adaptive", "--duration", d.String(), "--adaptive-step", "1.5s", "--redis-timeout", "1s")
	r := rows[0]
	if r.Answered429 == 0 {
		t.Fatalf("no 429 from a provider allowing %d/s to a target of %d/s", adaptiveLimit, adaptiveTarget)
	}
	if r.Learned == nil {
		t.Fatalf("learned rate unread: %s", r.LearnedErr)
	}
	// A machine too slow to fill the provider's second leaves the search
	// pressed too seldom to settle within the run: what it learned and
	// when its last 429 came say nothing then (the search's own tests in
	// admission decide it, on Redis's clock).
	if r.MaxAccount1s < adaptiveLimit {
		t.Logf("the account never filled the provider's second (most %d): the machine is too slow for the search to meet the limit (learned %v, last 429 at %v)",
			r.MaxAccount1s, r.Learned.RPS, r.Last429)
	} else {
		if r.Learned.RPS <= 0 || r.Learned.RPS >= adaptiveLimit {
			t.Errorf("learned rate at the end %v (%s), want below the provider's %d", r.Learned.RPS, r.Learned.Mode, adaptiveLimit)
		}
		if r.Last429 == nil || *r.Last429 > d-4*time.Second {
			t.Errorf("last 429 at %v into an %v run; want the 429s over 4 s before its end", r.Last429, d)
		}
	}
	if len(r.Trajectory) == 0 || r.Trajectory[0] != adaptiveTarget {
		t.Errorf("trajectory %v, want it to start at the target %d", r.Trajectory, adaptiveTarget)
	}
	for _, want := range []string{"learned rate every 5s: 90→", "criterion: 429s in all", "429s last 8s", "of 60"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// TestScenarioAdaptiveFailsTheRun: a 2 s adaptive run cannot meet the
// criterion (its first 429 pauses the account for most of the last
// second); Matrix's error says so, and tools/cmd/loadtest (cli.Main) exits 1 on it.
func TestScenarioAdaptiveFailsTheRun(t *testing.T) {
	var out bytes.Buffer
	cfg, err := ParseMatrix([]string{"--redis-url", "redis://" + redistest.Addr(t), "--scenario", "adaptive", "--duration", "2s", "--redis-timeout", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = Matrix(context.Background(), cfg, &out, tlog{t})
	t.Logf("\n%s", out.String())
	if !errors.Is(err, errScenarioFailed) {
		t.Errorf("run: %v, want an error wrapping errScenarioFailed", err)
	}
	if !strings.Contains(out.String(), "FAIL") {
		t.Error("the table shows no FAIL")
	}
}

func TestScenarioVerdict(t *testing.T) {
	good := &scenarioResult{Scenario: scenAdaptive, Senders: 3}
	bad := &scenarioResult{Scenario: scenAdaptive, Senders: 3, Failures: []string{"11 429s in all, more than 10"}}
	pool := &scenarioResult{Scenario: scenSenders, Senders: 3, Throttled: 5}
	if err := scenarioVerdict([]*scenarioResult{good, pool}); err != nil {
		t.Errorf("a passing adaptive row and a senders row: %v, want nil (the senders row has no criterion)", err)
	}
	if err := scenarioVerdict([]*scenarioResult{good, bad}); !errors.Is(err, errScenarioFailed) || !strings.Contains(err.Error(), "11 429s") {
		t.Errorf("a failing adaptive row: %v, want errScenarioFailed naming its failure", err)
	}
}

func TestTrajectoryText(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want string
	}{
		{nil, "(no reads)"},
		{[]float64{90}, "90"},
		{[]float64{90, 63, 63, 58.275, 58.275, 58.275}, "90→63×2→58.28×3"},
	} {
		if got := trajectoryText(tc.in); got != tc.want {
			t.Errorf("trajectoryText(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseFlagsScenarios(t *testing.T) {
	c, err := ParseMatrix([]string{"--scenario", "adaptive,senders"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.scenarios) != 2 || len(c.senders) != 1 || c.senders[0] != scenarioK {
		t.Fatalf("--scenario adaptive,senders: %+v, K %v; want both, in the order senders, adaptive, K=%d", c.scenarios, c.senders, scenarioK)
	}
	s, a := c.scenarios[0], c.scenarios[1]
	if s.name != scenSenders || s.duration != poolDuration || s.target != poolTarget || s.marketing != poolTarget || s.burst != poolBurst || s.otpRate != scenarioOTPRate {
		t.Errorf("senders defaults: %+v", s)
	}
	if a.name != scenAdaptive || a.duration != adaptiveDuration || a.target != adaptiveTarget || a.marketing != adaptiveTarget || a.burst != adaptiveBurst || a.tail() != adaptiveTail {
		t.Errorf("adaptive defaults: %+v, tail %v", a, a.tail())
	}
	if c.providerJitter != poolJitter || c.adaptiveStep != 10*time.Second {
		t.Errorf("jitter %v, step %v; want %v and 10s", c.providerJitter, c.adaptiveStep, poolJitter)
	}

	if c.pool != poolSenders {
		t.Errorf("pool %d, want %d", c.pool, poolSenders)
	}

	c, err = ParseMatrix([]string{"--scenario", "senders", "--duration", "3s", "--target-rps", "20", "--burst", "2", "--senders", "2,4", "--provider-arrival-jitter", "0", "--pool", "10000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.scenarios[0]; s.duration != 3*time.Second || s.target != 20 || s.marketing != 20 || s.burst != 2 || len(c.senders) != 2 || c.providerJitter != 0 || c.pool != 10_000 {
		t.Errorf("flags given: %+v, K %v, jitter %v, pool %d", s, c.senders, c.providerJitter, c.pool)
	}

	c, err = ParseMatrix(nil, io.Discard)
	if err != nil || c.scenarios != nil {
		t.Errorf("no --scenario: %v, scenarios %v; want the matrix", err, c.scenarios)
	}

	for _, args := range [][]string{
		{"--scenario", "pool"},
		{"--scenario", "senders", "--quick"},
		{"--scenario", "senders", "--strategies", "v2"},
		{"--scenario", "senders", "--soak", "1m"},
		{"--scenario", "senders", "--adaptive-step", "1s"},
		{"--scenario", "adaptive", "--provider-arrival-jitter", "1ms"},
		{"--scenario", "adaptive", "--adaptive-step", "50ms"},
		{"--scenario", "senders", "--target-rps", "26"},
		{"--scenario", "senders", "--pool", "0"},
		{"--scenario", "senders", "--pool", "10001"},
		{"--scenario", "adaptive", "--pool", "100"},
		{"--scenario", "senders", "--target-rps", "20", "--marketing-rps", "21"},
		{"--adaptive-step", "1s"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) accepted a bad command line", args)
		}
	}
}
