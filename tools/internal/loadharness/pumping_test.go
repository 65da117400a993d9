package loadharness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// syntheticPumping is a row of spec s: each attack range's first sends
// OTPs sent (the first failing on the primary, then sent on the backup:
// sends + 1 sends) and then blocked for reason (a
// conversion block on its first pumpingConvDigits digits), 10 OTPs of it
// blocked; 20 legitimate OTPs sent (legitBlocked of them blocked
// instead).
func syntheticPumping(s pumpingSpec, otps int, reason string, legitBlocked int) pumpingRun {
	run := pumpingRun{start: t0, msgs: map[string]pumpingMsg{}, ends: map[string]dispatch.Event{},
		cost: redisCost{scripts: 100, executed: 800, ops: map[string]int64{admission.OpAdmit: 50, guard.OpSent: 50}}}
	for _, rng := range s.ranges {
		for i := range otps + 10 {
			id := fmt.Sprintf("a%s-%d", rng, i)
			at := t0.Add(time.Duration(i) * 50 * time.Millisecond)
			run.msgs[id] = pumpingMsg{attack: true, rng: rng, published: at}
			if i >= otps {
				run.ends[id] = dispatch.Event{ID: id, Class: admission.OTP, Outcome: nack.Blocked, Finished: at}
				continue
			}
			run.ends[id] = dispatch.Event{ID: id, Class: admission.OTP, Outcome: nack.Sent, PublishTime: at, Finished: at}
			if i == 0 { // failed on the primary, then sent on the backup
				run.primary = append(run.primary, providertest.Arrival{ID: id, At: at, Outcome: "failed"})
				run.backup = append(run.backup, providertest.Arrival{ID: id, At: at, Outcome: "accepted"})
				continue
			}
			run.primary = append(run.primary, providertest.Arrival{ID: id, At: at, Outcome: "accepted"})
		}
		blocked := rng // a conversion block holds the range of min_conversion's digits
		if reason == guard.ReasonConversion {
			blocked = rng[:pumpingConvDigits]
		}
		run.blocks = append(run.blocks, blockSeen{At: time.Duration(otps) * 50 * time.Millisecond, Range: blocked, Reason: reason, Sends: otps})
	}
	for i := range 20 {
		id := fmt.Sprintf("l%d", i)
		at := t0.Add(time.Duration(i) * 200 * time.Millisecond)
		run.msgs[id] = pumpingMsg{verify: i%pumpingVerifyShare != 0, published: at}
		if i < legitBlocked {
			run.ends[id] = dispatch.Event{ID: id, Class: admission.OTP, Outcome: nack.Blocked, Finished: at}
			continue
		}
		run.ends[id] = dispatch.Event{ID: id, Class: admission.OTP, Outcome: nack.Sent, PublishTime: at, Finished: at.Add(10 * time.Millisecond)}
		run.primary = append(run.primary, providertest.Arrival{ID: id, At: at, Outcome: "accepted"})
	}
	return run
}

// TestPumpingCriterion: the on row passes with each attack range blocked
// by the range brake within count + 5 sends, the slow row by conversion
// under min_sends + 5; one send more, the wrong rule, or a legitimate
// OTP blocked fail them; the off row is held to nothing.
func TestPumpingCriterion(t *testing.T) {
	specs := pumpingSpecs(pumpingSettings{rowList: allGuardRows, attackRate: 40, slowRate: 1, grace: 2 * time.Second, duration: 30 * time.Second, legitRate: 5})
	off, on, slow := specs[0], specs[1], specs[2]
	for _, c := range []struct {
		name         string
		s            pumpingSpec
		otps         int // each range's, one of them sent twice: otps + 1 sends
		reason       string
		legitBlocked int
		failures     int
	}{
		{"on, count + 5 sends", on, pumpingPrefixCount + pumpingSlack - 1, guard.ReasonPrefixRate, 0, 0},
		{"on, one send more", on, pumpingPrefixCount + pumpingSlack, guard.ReasonPrefixRate, 0, 2},
		{"on, blocked by conversion", on, pumpingPrefixCount, guard.ReasonConversion, 0, 2},
		{"on, a legitimate OTP blocked", on, pumpingPrefixCount, guard.ReasonPrefixRate, 1, 1},
		{"slow, min_sends + 5 sends, fewer OTPs", slow, pumpingMinSends + pumpingSlack - 1, guard.ReasonConversion, 0, 0},
		{"slow, min_sends + 5 OTPs", slow, pumpingMinSends + pumpingSlack, guard.ReasonConversion, 0, 2},
		{"off, never blocked", off, 600, "", 0, 0},
	} {
		run := syntheticPumping(c.s, c.otps, c.reason, c.legitBlocked)
		if c.reason == "" {
			run.blocks = nil
		}
		r := measurePumping(c.s, run)
		if len(r.Failures) != c.failures {
			t.Errorf("%s: failures %q, want %d", c.name, r.Failures, c.failures)
		}
		if f := r.Ranges[0]; f.Sends != c.otps+1 || f.OTPs != c.otps || f.Accepted != c.otps || f.Backup != 1 || f.Blocked != 10 || r.LegitSent != 20-c.legitBlocked || r.LegitBlocked != c.legitBlocked {
			t.Errorf("%s: range %+v, legitimate sent %d blocked %d", c.name, f, r.LegitSent, r.LegitBlocked)
		}
		if r.GuardPerSent != 50/float64(r.Sent) || r.LegitP99 != 10*time.Millisecond {
			t.Errorf("%s: guard calls per sent %.3f of %d sent, legitimate p99 %v", c.name, r.GuardPerSent, r.Sent, r.LegitP99)
		}
	}
	r := measurePumping(on, syntheticPumping(on, pumpingPrefixCount, guard.ReasonPrefixRate, 0))
	var table bytes.Buffer
	if err := writePumpingTable(&table, &Config{pumping: pumpingSettings{attackRate: 40, slowRate: 1, legitRate: 5, grace: 2 * time.Second}}, []*pumpingRow{r}); err != nil {
		t.Fatal(err)
	}
	if s := table.String(); !strings.Contains(s, "prefix_rate") || !strings.Contains(s, " ok") || !strings.Contains(s, "0s 202/0, 5s 200/0, 10s 200/0, 15s 0/20") {
		t.Errorf("table:\n%s", s)
	}
}

// TestPumpingAccountsFileIsTheExample: the slow row's ACCOUNTS_FILE
// reads as docs/guard.md's example, with the grace --guard-grace gives,
// and two accounts serving OTP.
func TestPumpingAccountsFileIsTheExample(t *testing.T) {
	s := pumpingSpecs(pumpingSettings{rowList: []string{guardSlow}, grace: 2 * time.Second, slowRate: 1, legitRate: 5})[0]
	cfg, err := stackSettings("redis://127.0.0.1:1", filepath.Join(t.TempDir(), "accounts.yaml"), pumpingAccounts("lt-x", s)("http://127.0.0.1:1", "http://127.0.0.1:2"))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Policy(admission.OTP).Guard
	if g == nil || g.MaxPerPrefix.Digits != 6 || g.MaxPerPrefix.Count != 300 || g.MaxPerPrefix.Per != 10*time.Minute ||
		g.MinConversion.MinSends != 50 || g.MinConversion.Digits != 5 || g.MinConversion.Ratio != 0.2 || g.MinConversion.Grace != 2*time.Second {
		t.Errorf("the otp class's guard: %+v", g)
	}
	routing, err := cfg.Routing()
	if err != nil || len(routing.Accounts) != 2 {
		t.Errorf("routing: %+v, %v: want two accounts", routing.Accounts, err)
	}
}

// TestPumpingFlags: the scenario's flags belong to it.
func TestPumpingFlags(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "pumping", "--guard-rows", "slow,off", "--guard-grace", "5s", "--duration", "10s"}, io.Discard)
	if err != nil || !cfg.pumpingRun || strings.Join(cfg.pumping.rowList, ",") != "off,slow" || cfg.pumping.grace != 5*time.Second || cfg.pumping.duration != 10*time.Second {
		t.Fatalf("ParseMatrix: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{
		{"--guard-grace", "5s"},
		{"--scenario", "senders", "--attack-rate", "10"},
		{"--scenario", "pumping", "--guard-rows", "fast"},
		{"--scenario", "pumping", "--attack-rate", "90"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// TestScenarioPumpingRunsTheDispatcher runs the on row for 5 s on a Redis
// of its own: three processes as serve wires them with the guard of the
// example, every OTP ended, the legitimate ones sent and verified, none
// blocked, and the sends counted by the guard's counter.
func TestScenarioPumpingRunsTheDispatcher(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "pumping", "--guard-rows", "on", "--duration", "5s", "--redis-timeout", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runPumping(context.Background(), cfg, "unix://"+redistest.Private(t), pumpingSpecs(cfg.pumping)[0], tlog{t})
	if err != nil {
		t.Fatalf("runPumping: %v", err)
	}
	var table bytes.Buffer
	if err := writePumpingTable(&table, cfg, []*pumpingRow{r}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if r.Unended != 0 || r.LegitSent < 15 || r.LegitBlocked != 0 || r.Verified == 0 {
		t.Errorf("unended %d, legitimate sent %d blocked %d, verifications %d: want every OTP ended, the legitimate ones sent and verified", r.Unended, r.LegitSent, r.LegitBlocked, r.Verified)
	}
	// The guard's counter lingers for more sends (guard.md): a call may
	// carry several.
	if r.CostErr != "" || r.GuardPerSent == 0 {
		t.Errorf("guard-sent calls per sent message %.2f (%s): want the sends counted", r.GuardPerSent, r.CostErr)
	}
}
