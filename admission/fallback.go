package admission

import "time"

// cell is one in-process GCRA state: the same algorithm as gcra.lua, on the
// process clock, used only while Redis is unreachable. The zero value admits
// at once. Not safe for concurrent use.
type cell struct {
	interval time.Duration
	tau      time.Duration
	tat      time.Time // theoretical arrival time of the next admission
}

// check returns the TAT after one more admission at now and how long the
// caller would have to wait for it; a wait <= 0 means now.
func (c *cell) check(now time.Time) (time.Time, time.Duration) {
	tat := c.tat
	if tat.Before(now) {
		tat = now // idle time banks no credit beyond tau
	}
	return tat.Add(c.interval), tat.Sub(now) - c.tau
}

// fallback is a process's share of the account while Redis is unreachable:
// TargetRPS/MaxSenders overall and MarketingRPS/MaxSenders for marketing,
// one message at a time (tau 0), so that every process falling back at once
// still stays at TargetRPS. Not safe for concurrent use.
type fallback struct {
	global    cell
	marketing cell
	senders   []cell // the pool's senders, each at its RPS/MaxSenders
	from      []string
}

func newFallback(cfg Config) fallback {
	n := float64(cfg.MaxSenders)
	f := fallback{
		global:    cell{interval: interval(cfg.TargetRPS / n)},
		marketing: cell{interval: interval(cfg.MarketingRPS / n)},
	}
	for _, s := range cfg.Senders {
		f.senders = append(f.senders, cell{interval: senderInterval(s.RPS/n, cfg.ArrivalJitter)})
		f.from = append(f.from, s.From)
	}
	return f
}

// learnedRate sets the process's share from the account's learned rate
// (0: none, the configured rates), marketing's in proportion, as gcra.lua
// applies it: what the provider's 429s taught holds while Redis is down.
func (f *fallback) learnedRate(cfg Config, learned float64) {
	procs := float64(cfg.MaxSenders)
	g, m := cfg.TargetRPS, cfg.MarketingRPS
	if learned > 0 && learned < g {
		g, m = learned, m*learned/g
	}
	f.global.interval, f.marketing.interval = interval(g/procs), interval(m/procs)
}

// enterAt starts a fallback episode at now. u in [0, 1) places each cell's
// first slot at a random point of its interval, so that processes that lose
// Redis at the same instant do not all send at that instant.
func (f *fallback) enterAt(now time.Time, u float64) {
	cells := []*cell{&f.global, &f.marketing}
	for i := range f.senders {
		cells = append(cells, &f.senders[i])
	}
	for _, c := range cells {
		start := now.Add(time.Duration(u * float64(c.interval)))
		if c.tat.Before(start) {
			c.tat = start
		}
	}
}

// decideAt decides one admission of class at now. Marketing must pass both
// cells and updates both only when both pass, like the script.
func (f *fallback) decideAt(now time.Time, class Class) Decision {
	gNew, gWait := f.global.check(now)
	var mNew time.Time
	mWait := time.Duration(-1)
	if class == Marketing {
		mNew, mWait = f.marketing.check(now)
	}
	pick, sWait := -1, time.Duration(-1)
	var sNew time.Time
	for i := range f.senders {
		t, w := f.senders[i].check(now)
		if pick < 0 || w < sWait {
			pick, sWait, sNew = i, w, t
		}
	}
	if gWait > 0 || mWait > 0 || sWait > 0 {
		switch {
		case sWait > gWait && sWait > mWait:
			return Decision{RetryAfter: sWait, Source: SourceFallback, Reason: ReasonSender}
		case mWait > gWait:
			return Decision{RetryAfter: mWait, Source: SourceFallback, Reason: ReasonMarketing}
		}
		return Decision{RetryAfter: gWait, Source: SourceFallback, Reason: ReasonGlobal}
	}
	f.global.tat = gNew
	if class == Marketing {
		f.marketing.tat = mNew
	}
	d := Decision{Allowed: true, Source: SourceFallback}
	if pick >= 0 {
		f.senders[pick].tat = sNew
		d.Sender = f.from[pick]
	}
	return d
}
