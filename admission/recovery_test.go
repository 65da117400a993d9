package admission

import (
	"context"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// degrade makes l's account degraded: 3 timeouts in a row.
func degrade(t *testing.T, l *Limiter) {
	t.Helper()
	for range 3 {
		sendOnce(t, l, ResultTimedOut, time.Second, false)
	}
	if h := l.Health(); h != Degraded {
		t.Fatalf("after 3 timeouts health = %v, want degraded", h)
	}
}

// admitProbe admits one probe of l's degraded account and returns it
// unsettled: a send still waiting for its answer.
func admitProbe(t *testing.T, l *Limiter) Decision {
	t.Helper()
	d, err := l.Admit(context.Background(), OTP, 1, time.Second, Claim{})
	if err != nil || !d.Allowed || d.Health != Degraded {
		t.Fatalf("a probe: %+v, %v; want one admitted on the degraded account", d, err)
	}
	return d
}

// Probes sent while the provider hung, whose timeouts come after it has
// recovered, do not make it degraded again: their sends began before the
// recovery.
func TestTimeoutsOfSendsBegunBeforeARecoveryDoNotCount(t *testing.T) {
	t.Parallel() // it waits on real probe intervals
	l := newLimiter(t, redistest.Client(t), healthConfig(t))
	degrade(t, l)
	var hung []Decision
	for range 3 {
		hung = append(hung, admitProbe(t, l))
	}
	for range 3 {
		sendOnce(t, l, ResultOK, time.Second, false)
	}
	if h := l.Health(); h != Healthy {
		t.Fatalf("after 3 probes' successes health = %v, want healthy", h)
	}
	for _, d := range hung {
		if err := l.Settle(context.Background(), d, "", ResultTimedOut, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
	if h := l.Health(); h != Healthy {
		t.Fatalf("after 3 timeouts of probes sent before the recovery health = %v, want healthy", h)
	}
	if _, err := l.RefreshHealth(context.Background(), 0); err != nil || l.Health() != Healthy {
		t.Fatalf("the health key read back: %v, %v; want healthy", l.Health(), err)
	}
	// A send begun after the recovery counts as ever.
	degrade(t, l)
}

// While degraded, a probe's failure whose send began before the run of
// probes' first success does not start the count again: a probe sent in
// the hang says nothing of the provider that answered since.
func TestAnOldProbesFailureDoesNotRestartTheCount(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, redistest.Client(t), healthConfig(t))
	degrade(t, l)
	hung := admitProbe(t, l)
	sendOnce(t, l, ResultOK, time.Second, false)
	sendOnce(t, l, ResultOK, time.Second, false)
	if err := l.Settle(context.Background(), hung, "", ResultTimedOut, ledger.Story{}); err != nil {
		t.Fatal(err)
	}
	sendOnce(t, l, ResultOK, time.Second, false)
	if h := l.Health(); h != Healthy {
		t.Fatalf("after 3 probes' successes and an older probe's timeout health = %v, want healthy", h)
	}
	// A probe begun after a success that fails starts the count again.
	degrade(t, l)
	sendOnce(t, l, ResultOK, time.Second, false)
	sendOnce(t, l, ResultTimedOut, time.Second, false)
	sendOnce(t, l, ResultOK, time.Second, false)
	sendOnce(t, l, ResultOK, time.Second, false)
	if h := l.Health(); h != Degraded {
		t.Fatalf("a probe's failure between successes did not start the count again: %v", h)
	}
}

// A caller that hedges its send takes a degraded account's probe once
// HedgedProbeEvery has passed since the last one; a caller that only
// fails over is denied at once until the probe has been due an interval.
func TestAHedgedCallerProbesADegradedAccountOften(t *testing.T) {
	cfg := healthConfig(t)
	cfg.Health.ProbeEvery, cfg.Health.HedgedProbeEvery = 10*time.Second, 20*time.Millisecond
	l := newLimiter(t, redistest.Client(t), cfg)
	degrade(t, l)
	ctx := context.Background()
	for i := range 3 {
		d, err := l.Admit(ctx, OTP, 1, time.Second, Claim{Failover: true})
		if err != nil || d.Allowed || d.Reason != ReasonDegraded {
			t.Fatalf("a caller that fails over: %+v, %v; want denied at once (degraded)", d, err)
		}
		d, err = l.Admit(ctx, OTP, 1, time.Second, Claim{Failover: true, Hedged: true})
		if err != nil {
			t.Fatal(err)
		}
		for !d.Allowed && d.Reason == ReasonDegraded && d.RetryAfter <= cfg.Health.HedgedProbeEvery {
			time.Sleep(d.RetryAfter) // the caller fails over meanwhile; it is asked again here
			d, err = l.Admit(ctx, OTP, 1, time.Second, Claim{Failover: true, Hedged: true})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !d.Allowed || d.Health != Degraded {
			t.Fatalf("hedged probe %d: %+v; want a probe of the degraded account within %v", i, d, cfg.Health.HedgedProbeEvery)
		}
		if err := l.Settle(ctx, d, "", ResultTimedOut, ledger.Story{}); err != nil {
			t.Fatal(err)
		}
	}
}
