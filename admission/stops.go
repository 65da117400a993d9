package admission

import (
	"strings"
	"time"
)

// stops is what this process knows of the account's stops: the latest
// 429's penalty, the account-level pause, and whether it decides locally
// because Redis did not answer (the fallback). Redis holds the stops of
// every process (penalty.lua, the admission script); this is the process's copy, so
// that a live stop is decided without asking, and asked about again
// often enough that another process ending it (ClearPenalty,
// ResumeAccount) ends it here too.
//
// Its methods are pure: each takes the instant it happens at and what
// Redis said, and reads no clock and calls no Redis. Not safe for
// concurrent use: the Limiter holds it under its mutex.
type stops struct {
	penalty  stop
	pause    stop
	why      string // the pause's why ("account:..."); "" without one
	fallback bool   // deciding locally since Redis last answered
}

// stop is one stop as this process knows of it.
type stop struct {
	until   time.Time // its end; zero (long past) when there is none
	checked time.Time // when Redis last confirmed it, or this process reported it
	shared  bool      // Redis holds it: Redis saying there is none ends it here
}

// live reports whether the stop holds at now.
func (p stop) live(now time.Time) bool { return now.Before(p.until) }

// held returns the denial decided at now without Redis, if any: a
// penalty that Redis never recorded (it holds until its end) or that
// Redis confirmed less than penaltyRecheck ago, or a pause confirmed less
// than accountRecheck ago. A stop older than that is asked about again.
func (s *stops) held(now time.Time) (Decision, bool) {
	if s.penalty.live(now) && (!s.penalty.shared || now.Sub(s.penalty.checked) < penaltyRecheck) {
		return s.penaltyDecision(now), true
	}
	if s.pause.live(now) && now.Sub(s.pause.checked) < accountRecheck {
		return s.pauseDecision(now), true
	}
	return Decision{}, false
}

// live returns the denial of the pause or penalty live at now, if any,
// the pause first.
func (s *stops) live(now time.Time) (Decision, bool) {
	switch {
	case s.pause.live(now):
		return s.pauseDecision(now), true
	case s.penalty.live(now):
		return s.penaltyDecision(now), true
	}
	return Decision{}, false
}

// penaltyDecision is the denial at now of the 429 penalty.
func (s *stops) penaltyDecision(now time.Time) Decision {
	return Decision{RetryAfter: s.penalty.until.Sub(now), Source: SourcePenalty, Reason: ReasonPenalty}
}

// pauseDecision is the denial at now of the account-level pause.
func (s *stops) pauseDecision(now time.Time) Decision {
	return Decision{RetryAfter: s.pause.until.Sub(now), Source: SourcePenalty, Reason: ReasonAccount, Why: s.why}
}

// accountPause returns the pause live at now: its why and time left.
func (s *stops) accountPause(now time.Time) (why string, left time.Duration, ok bool) {
	if !s.pause.live(now) {
		return "", 0, false
	}
	return s.why, s.pause.until.Sub(now), true
}

// unsharedPause returns the pause live at now that Redis was never told
// of: its why and time left, to record in Redis before asking it.
func (s *stops) unsharedPause(now time.Time) (why string, left time.Duration, ok bool) {
	if !s.pause.live(now) || s.pause.shared {
		return "", 0, false
	}
	return s.why, s.pause.until.Sub(now), true
}

// pauseDue returns the pause live at now that Redis should be asked
// about (confirmed accountRecheck ago or more); unshared when Redis was
// never told of it.
func (s *stops) pauseDue(now time.Time) (why string, left time.Duration, unshared, due bool) {
	if !s.pause.live(now) || now.Sub(s.pause.checked) < accountRecheck {
		return "", 0, false, false
	}
	return s.why, s.pause.until.Sub(now), !s.pause.shared, true
}

// report notes this process's own stop at now for d: a 429's penalty when
// why is empty, an account-level pause otherwise. A longer live one is
// never shortened. Redis is not told yet (recorded says it was).
func (s *stops) report(now time.Time, d time.Duration, why string) {
	if why == "" {
		s.penalty.until = later(s.penalty.until, now.Add(d))
		s.penalty.checked, s.penalty.shared = now, false
		return
	}
	s.pause.until = later(s.pause.until, now.Add(d))
	s.why, s.pause.checked, s.pause.shared = why, now, false
}

// recorded notes penalty.lua's answer to this process's report made at
// reported, received at now: the stop Redis holds (its why live, left to
// run) may be longer than the one reported, or an account pause a 429
// falls within. throttled says the report was a 429's.
func (s *stops) recorded(reported, now time.Time, left time.Duration, live string, throttled bool) {
	if strings.HasPrefix(live, "account") {
		s.pause.until = later(s.pause.until, reported.Add(left))
		s.why, s.pause.shared = live, true
	} else {
		s.penalty.until = later(s.penalty.until, reported.Add(left))
	}
	if throttled {
		s.penalty.checked, s.penalty.shared = now, true
	}
}

// pauseRecorded notes that Redis holds the pause: it was told of it.
func (s *stops) pauseRecorded() { s.pause.shared = true }

// pauseUnchecked notes that Redis could not be asked about the pause at
// now: it holds, and is asked about again after accountRecheck. It
// returns the pause's denial.
func (s *stops) pauseUnchecked(now time.Time) Decision {
	s.pause.checked = now
	return s.pauseDecision(now)
}

// pauseRead notes pause.lua's answer, received at now, to a question
// asked at asked: the account-level pause Redis holds has left to run
// with why live (left 0: none, or another kind). ok false: Redis did not
// answer, and the pause holds.
func (s *stops) pauseRead(asked, now time.Time, left time.Duration, live string, ok bool) {
	switch {
	case !ok:
		s.pause.checked = now
	case left > 0 && strings.HasPrefix(live, "account"):
		s.pause.until, s.why = now.Add(left), live
		s.pause.checked, s.pause.shared = now, true
	case s.pause.checked.Before(asked):
		s.endPause() // Redis held it and holds it no more
	}
}

// endPause forgets the account-level pause; when Redis last confirmed it
// is kept.
func (s *stops) endPause() {
	s.pause.until, s.why, s.pause.shared = time.Time{}, "", false
}

// endPenalty forgets the 429 penalty.
func (s *stops) endPenalty() {
	s.penalty.until, s.penalty.shared = time.Time{}, false
}

// unanswered notes that Redis did not answer an admission at now. A live
// pause or penalty holds (Redis cannot say it is over): its denial is
// returned and it is asked about again after its recheck. Else begun
// reports whether this begins a fallback episode.
func (s *stops) unanswered(now time.Time) (d Decision, held, begun bool) {
	switch {
	case s.pause.live(now):
		return s.pauseUnchecked(now), true, false
	case s.penalty.live(now):
		s.penalty.checked = now
		return s.penaltyDecision(now), true, false
	}
	begun = !s.fallback
	s.fallback = true
	return Decision{}, false, begun
}

// answered notes Redis's answer d, received at now, to an admission asked
// at asked, and returns the decision to give. Redis's answer ends the
// fallback, and ends or renews the stops Redis held. unused reports that
// d's slot goes unused: a pause Redis was never told of holds, and its
// denial is returned.
func (s *stops) answered(asked, now time.Time, d Decision) (_ Decision, unused bool) {
	s.fallback = false
	switch {
	case d.Reason == ReasonAccount:
		// Redis's word: the pause may have been ended and begun again.
		s.pause.until, s.why = now.Add(d.RetryAfter), d.Why
		s.pause.checked, s.pause.shared = now, true
	case s.pause.live(now) && s.pause.shared && s.pause.checked.Before(asked):
		s.endPause() // Redis held it and holds it no more: ended or run out
	case s.pause.live(now) && s.pause.shared:
		// Reported while this call was on its way: its answer predates it.
	case s.pause.live(now):
		// Redis could not be told of it, and did not decide about it.
		return s.pauseUnchecked(now), d.Allowed
	}
	switch {
	case d.Reason == ReasonPenalty && s.penalty.checked.Before(asked):
		// Redis's word: the penalty may have been cleared and begun again.
		s.penalty.until, s.penalty.checked, s.penalty.shared = now.Add(d.RetryAfter), now, true
	case d.Reason == ReasonPenalty:
		// Reported while this call was on its way.
		s.penalty.until = later(s.penalty.until, now.Add(d.RetryAfter))
	case s.penalty.live(now) && s.penalty.shared && s.penalty.checked.Before(asked):
		s.endPenalty() // Redis held it and holds it no more: cleared or run out
	}
	return d, false
}

// state reports whether a penalty or pause is live at now, and whether
// the process decides locally.
func (s *stops) state(now time.Time) (stopped, fallback bool) {
	return s.penalty.live(now) || s.pause.live(now), s.fallback
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
