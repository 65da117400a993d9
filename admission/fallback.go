package admission

import "time"

// cell is one in-process GCRA state: the same algorithm as the admission script, on the
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
// TargetRPS/MaxSenders overall and each class's levels (its ceiling, the
// reserves it is held to) at their rate/MaxSenders, one message at a time
// (tau 0), so that every process falling back at once still stays at
// every level's rate. Not safe for concurrent use.
type fallback struct {
	global  cell
	levels  []cell    // the classes' levels, in the order of classLevels
	rates   []float64 // their configured rates
	senders []cell    // the pool's senders, each at its RPS/MaxSenders
	from    []string
}

func newFallback(cfg Config) fallback {
	n := float64(cfg.MaxSenders)
	f := fallback{global: cell{interval: interval(cfg.TargetRPS / n)}, rates: levelRates(cfg)}
	f.levels = make([]cell, len(f.rates))
	for i, r := range f.rates {
		f.levels[i].interval = interval(r / n)
	}
	for _, s := range cfg.Senders {
		f.senders = append(f.senders, cell{interval: senderInterval(s.RPS/n, cfg.ArrivalJitter)})
		f.from = append(f.from, s.From)
	}
	return f
}

// learnedRate sets the process's share from the account's learned rate
// (0: none, the configured rates), the levels' in proportion, as the admission script
// applies it: what the provider's 429s taught holds while Redis is down.
func (f *fallback) learnedRate(cfg Config, learned float64) {
	procs, scale := float64(cfg.MaxSenders), 1.0
	if learned > 0 && learned < cfg.TargetRPS {
		scale = learned / cfg.TargetRPS
	}
	f.global.interval = interval(cfg.TargetRPS * scale / procs)
	for i, r := range f.rates {
		f.levels[i].interval = interval(r * scale / procs)
	}
}

// enterAt starts a fallback episode at now. u in [0, 1) places each cell's
// first slot at a random point of its interval, so that processes that lose
// Redis at the same instant do not all send at that instant.
func (f *fallback) enterAt(now time.Time, u float64) {
	cells := []*cell{&f.global}
	for i := range f.levels {
		cells = append(cells, &f.levels[i])
	}
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

// decideAt decides one admission at now of a class held to levels (its
// ceiling first, if it has one, then its reserves; ceiling says whether it
// has one). It must pass every cell, and updates them only when all pass,
// like the script.
func (f *fallback) decideAt(now time.Time, levels []int, ceiling bool) Decision {
	gNew, gWait := f.global.check(now)
	lNew := make([]time.Time, len(levels))
	lWait, worst := time.Duration(-1), -1
	for i, j := range levels {
		var w time.Duration
		lNew[i], w = f.levels[j].check(now)
		if w > lWait {
			lWait, worst = w, i
		}
	}
	pick, sWait := -1, time.Duration(-1)
	var sNew time.Time
	for i := range f.senders {
		t, w := f.senders[i].check(now)
		if pick < 0 || w < sWait {
			pick, sWait, sNew = i, w, t
		}
	}
	if gWait > 0 || lWait > 0 || sWait > 0 {
		switch {
		case sWait > gWait && sWait > lWait:
			return Decision{RetryAfter: sWait, Source: SourceFallback, Reason: ReasonSender}
		case lWait > gWait && worst == 0 && ceiling:
			return Decision{RetryAfter: lWait, Source: SourceFallback, Reason: ReasonCeiling}
		case lWait > gWait:
			return Decision{RetryAfter: lWait, Source: SourceFallback, Reason: ReasonReserve}
		}
		return Decision{RetryAfter: gWait, Source: SourceFallback, Reason: ReasonGlobal}
	}
	f.global.tat = gNew
	for i, j := range levels {
		f.levels[j].tat = lNew[i]
	}
	d := Decision{Allowed: true, Source: SourceFallback}
	if pick >= 0 {
		f.senders[pick].tat = sNew
		d.Sender = f.from[pick]
	}
	return d
}
