package admission

import (
	"fmt"
	"testing"
	"time"
)

// The stop state is tested as golang.org/x/time/rate's limiter is: a table
// of steps at explicit instants (ms after t0), each an event and what the
// stops decide at that instant afterwards without Redis (held), as a
// short text.

// instant is the instant ms milliseconds after t0.
func instant(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// stopStep is one step: at ms, event happens, then held decides want.
type stopStep struct {
	ms    int
	event stopEvent
	want  string // held's denial ("penalty 900ms", "account 2s account:x") or "ask" (Redis is asked)
}

// stopEvent is something that happens to the stops at now; its result is
// checked by the step when it returns one ("" is not checked).
type stopEvent func(s *stops, now time.Time) string

// nothing: only time passes.
func nothing(*stops, time.Time) string { return "" }

// reported429 is this process's 429 asking for d.
func reported429(d time.Duration) stopEvent {
	return func(s *stops, now time.Time) string { s.report(now, d, ""); return "" }
}

// reportedPause is this process's account refusal, pausing for d.
func reportedPause(d time.Duration, why string) stopEvent {
	return func(s *stops, now time.Time) string { s.report(now, d, why); return "" }
}

// penaltySaid is penalty.lua's answer, received at now, to a report made
// ago earlier: Redis holds the stop live for left.
func penaltySaid(ago, left time.Duration, live string, throttled bool) stopEvent {
	return func(s *stops, now time.Time) string {
		s.recorded(now.Add(-ago), now, left, live, throttled)
		return ""
	}
}

// admitSaid is the admission script's answer d, received at now, to an admission asked
// ago earlier; it returns the decision given and whether its slot goes
// unused.
func admitSaid(ago time.Duration, d Decision) stopEvent {
	return func(s *stops, now time.Time) string {
		got, unused := s.answered(now.Add(-ago), now, d)
		return describe(got, true) + fmt.Sprintf(" unused=%v", unused)
	}
}

// redisDown is an admission Redis did not answer at now: the stop that
// holds, or the fallback, and whether it began then.
func redisDown(s *stops, now time.Time) string {
	d, held, begun := s.unanswered(now)
	if held {
		return describe(d, true)
	}
	return fmt.Sprintf("fallback begun=%v", begun)
}

// pauseSaid is pause.lua's answer, received at now, to a question asked ago
// earlier (ok false: none).
func pauseSaid(ago, left time.Duration, live string, ok bool) stopEvent {
	return func(s *stops, now time.Time) string {
		s.pauseRead(now.Add(-ago), now, left, live, ok)
		return ""
	}
}

// due is what CheckPause would do at now: "ask" (with "unshared" when
// Redis must be told first) or "no".
func due(s *stops, now time.Time) string {
	_, _, unshared, due := s.pauseDue(now)
	switch {
	case due && unshared:
		return "ask unshared"
	case due:
		return "ask"
	}
	return "no"
}

// describe is a decision as the table writes it: its reason, its wait,
// and its why if any; "ask" for no denial when ok is false.
func describe(d Decision, ok bool) string {
	if !ok {
		return "ask"
	}
	if d.Allowed {
		return fmt.Sprintf("allowed %v", d.RetryAfter)
	}
	s := fmt.Sprintf("%s %v", d.Reason, d.RetryAfter)
	if d.Why != "" {
		s += " " + d.Why
	}
	return s
}

func TestStopsDecideFromATableOfInstants(t *testing.T) {
	const ms = time.Millisecond
	admitted := Decision{Allowed: true, Source: SourceRedis}
	tests := []struct {
		name  string
		steps []stopStep
		// results are the events' results, in order, where they give one.
		results []string
	}{{
		name: "no stop: Redis is asked",
		steps: []stopStep{
			{0, nothing, "ask"},
			{5000, nothing, "ask"},
		},
	}, {
		name: "a 429 Redis never recorded holds to its end, however old",
		steps: []stopStep{
			{0, reported429(3 * time.Second), "penalty 3s"},
			{1500, nothing, "penalty 1.5s"},
			{2999, nothing, "penalty 1ms"},
			{3000, nothing, "ask"},
		},
	}, {
		name: "a 429 Redis recorded is asked about again after penaltyRecheck",
		steps: []stopStep{
			{0, reported429(3 * time.Second), "penalty 3s"},
			{10, penaltySaid(10*ms, 3*time.Second, "throttled", true), "penalty 2.99s"},
			{1009, nothing, "penalty 1.991s"},
			{1010, nothing, "ask"},
		},
	}, {
		name: "Redis holding a longer penalty lengthens this process's",
		steps: []stopStep{
			{0, reported429(time.Second), "penalty 1s"},
			{10, penaltySaid(10*ms, 5*time.Second, "throttled", true), "penalty 4.99s"},
			{1010, nothing, "ask"},
		},
	}, {
		name: "Redis saying none ends a penalty it held",
		steps: []stopStep{
			{0, reported429(5 * time.Second), "penalty 5s"},
			{10, penaltySaid(10*ms, 5*time.Second, "throttled", true), "penalty 4.99s"},
			{1100, admitSaid(10*ms, admitted), "ask"},
			{1200, nothing, "ask"},
		},
		results: []string{"allowed 0s unused=false"},
	}, {
		name: "an answer asked before the 429 was reported does not end it",
		steps: []stopStep{
			{0, reported429(5 * time.Second), "penalty 5s"},
			{10, penaltySaid(10*ms, 5*time.Second, "throttled", true), "penalty 4.99s"},
			{20, admitSaid(50*ms, admitted), "penalty 4.98s"},
		},
		results: []string{"allowed 0s unused=false"},
	}, {
		name: "Redis's penalty is learned from an admission's answer",
		steps: []stopStep{
			{0, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonPenalty, RetryAfter: 2 * time.Second}), "penalty 2s"},
			{999, nothing, "penalty 1.001s"},
			{1000, nothing, "ask"},
			{1005, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonPenalty, RetryAfter: 995 * ms}), "penalty 995ms"},
			{2000, nothing, "ask"},
		},
		results: []string{"penalty 2s unused=false", "penalty 995ms unused=false"},
	}, {
		name: "a penalty reported while the admission was on its way keeps the later end",
		steps: []stopStep{
			{0, reported429(4 * time.Second), "penalty 4s"},
			{10, admitSaid(50*ms, Decision{Source: SourceRedis, Reason: ReasonPenalty, RetryAfter: time.Second}), "penalty 3.99s"},
		},
		results: []string{"penalty 1s unused=false"},
	}, {
		name: "a pause with its why is asked about after accountRecheck",
		steps: []stopStep{
			{0, reportedPause(10*time.Second, "account:401 bad key"), "account 10s account:401 bad key"},
			{500, due, "account 9.5s account:401 bad key"},
			{1000, due, "ask"},
			{1000, penaltySaid(1000*ms, 10*time.Second, "account:401 bad key", false), "ask"},
			{1010, pauseSaid(10*ms, 8*time.Second, "account:401 bad key", true), "account 8s account:401 bad key"},
			{2009, due, "account 7.001s account:401 bad key"},
			{2010, due, "ask"},
		},
		results: []string{"no", "ask unshared", "no", "ask"},
	}, {
		name: "pause.lua saying none ends the pause; no answer keeps it",
		steps: []stopStep{
			{0, reportedPause(10*time.Second, "account:x"), "account 10s account:x"},
			{10, penaltySaid(10*ms, 10*time.Second, "account:x", false), "account 9.99s account:x"},
			{1000, pauseSaid(5*ms, 0, "", false), "account 9s account:x"},
			{2000, pauseSaid(5*ms, 0, "", true), "ask"},
			{2001, due, "ask"},
		},
		results: []string{"no"},
	}, {
		name: "a 429 within a pause Redis holds learns the pause",
		steps: []stopStep{
			{0, reported429(time.Second), "penalty 1s"},
			{10, penaltySaid(10*ms, 30*time.Second, "account:suspended", true), "penalty 990ms"},
			{1000, nothing, "ask"},
			{1000, redisDown, "account 29s account:suspended"},
		},
		results: []string{"account 29s account:suspended"},
	}, {
		name: "Redis's answer renews or ends a pause",
		steps: []stopStep{
			{0, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonAccount, RetryAfter: 3 * time.Second, Why: "account:a"}), "account 3s account:a"},
			{1000, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonAccount, RetryAfter: 5 * time.Second, Why: "account:b"}), "account 5s account:b"},
			{2000, admitSaid(5*ms, admitted), "ask"},
		},
		results: []string{"account 3s account:a unused=false", "account 5s account:b unused=false", "allowed 0s unused=false"},
	}, {
		name: "a pause Redis was never told of holds over an admission it allowed",
		steps: []stopStep{
			{0, reportedPause(5*time.Second, "account:x"), "account 5s account:x"},
			{1500, admitSaid(5*ms, admitted), "account 3.5s account:x"},
			{2500, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonGlobal, RetryAfter: ms}), "account 2.5s account:x"},
			{3500, nothing, "ask"},
		},
		results: []string{"account 3.5s account:x unused=true", "account 2.5s account:x unused=false"},
	}, {
		name: "a pause reported while the admission was on its way holds",
		steps: []stopStep{
			{0, reportedPause(5*time.Second, "account:x"), "account 5s account:x"},
			{10, penaltySaid(10*ms, 5*time.Second, "account:x", false), "account 4.99s account:x"},
			{20, admitSaid(50*ms, admitted), "account 4.98s account:x"},
		},
		results: []string{"allowed 0s unused=false"},
	}, {
		name: "the fallback begins once, and Redis's answer ends it",
		steps: []stopStep{
			{0, redisDown, "ask"},
			{100, redisDown, "ask"},
			{200, admitSaid(5*ms, admitted), "ask"},
			{300, redisDown, "ask"},
		},
		results: []string{"fallback begun=true", "fallback begun=false", "allowed 0s unused=false", "fallback begun=true"},
	}, {
		name: "with Redis down a penalty holds and is asked about again after its recheck",
		steps: []stopStep{
			{0, admitSaid(5*ms, Decision{Source: SourceRedis, Reason: ReasonPenalty, RetryAfter: 5 * time.Second}), "penalty 5s"},
			{1000, redisDown, "penalty 4s"},
			{1999, nothing, "penalty 3.001s"},
			{2000, nothing, "ask"},
		},
		results: []string{"penalty 5s unused=false", "penalty 4s"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s stops
			var results []string
			for i, st := range tt.steps {
				now := instant(st.ms)
				if r := st.event(&s, now); r != "" {
					results = append(results, r)
				}
				if got := describe(s.held(now)); got != st.want {
					t.Fatalf("step %d at %dms: held says %q, want %q", i, st.ms, got, st.want)
				}
			}
			if fmt.Sprint(results) != fmt.Sprint(tt.results) {
				t.Fatalf("events gave %q, want %q", results, tt.results)
			}
		})
	}
}

// TestStopsStateAndLive: what State, AccountPause and a booked slot's
// last check (live) read of the stops, at instants around each stop's end.
func TestStopsStateAndLive(t *testing.T) {
	var s stops
	s.report(instant(0), 2*time.Second, "")
	s.report(instant(0), time.Second, "account:x")
	for _, tt := range []struct {
		ms                  int
		stopped, fallback   bool
		live, accountPaused string
	}{
		{0, true, false, "account 1s account:x", "account:x 1s"},
		{999, true, false, "account 1ms account:x", "account:x 1ms"},
		{1000, true, false, "penalty 1s", ""},
		{2000, false, false, "ask", ""},
	} {
		now := instant(tt.ms)
		stopped, fallback := s.state(now)
		why, left, ok := s.accountPause(now)
		paused := ""
		if ok {
			paused = fmt.Sprintf("%s %v", why, left)
		}
		if got := describe(s.live(now)); stopped != tt.stopped || fallback != tt.fallback || got != tt.live || paused != tt.accountPaused {
			t.Fatalf("at %dms: state %v %v, live %q, pause %q; want %v %v, %q, %q",
				tt.ms, stopped, fallback, got, paused, tt.stopped, tt.fallback, tt.live, tt.accountPaused)
		}
	}
	s.fallback = true
	if _, fallback := s.state(instant(0)); !fallback {
		t.Fatal("state does not say the fallback")
	}
	s.endPenalty()
	s.endPause()
	if stopped, _ := s.state(instant(0)); stopped {
		t.Fatal("ended stops still stop")
	}
}
