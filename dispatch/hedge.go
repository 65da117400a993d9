package dispatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// The hedge: a first-class message its home has not answered within a
// bound taken from the home's recent answers goes out on the next account
// of its route too, and the first acceptance is the delivery's ("The Tail
// at Scale", Dean and Barroso, 2013). A hanging provider then costs an OTP
// the bound, not SEND_TIMEOUT; the send abandoned counts as a timeout in
// its account's health, so that the account is degraded after a few
// hedges rather than after a few timeouts (docs/decisions.md, "An
// account's health", the hedge).

// Bounds of the hedge's wait for the home's answer.
const (
	// HedgeFloor is the shortest: below it a provider's ordinary jitter
	// would double the first class's sends.
	HedgeFloor = 300 * time.Millisecond
	// HedgeCeiling is the longest, and the wait before an account has
	// answered hedgeMinSamples sends: an OTP through a hang within 2 s.
	HedgeCeiling = 1500 * time.Millisecond
	// hedgeQuantile of the home's last hedgeSamples answers is the wait,
	// within the bounds: about one send in a hundred is hedged.
	hedgeQuantile   = 0.99
	hedgeSamples    = 200
	hedgeMinSamples = 20
	// hedgeSlotWait bounds the hedge's wait for a slot on the next
	// account (and the message's deadline does): the home's claim covers
	// SEND_TIMEOUT + 5 s, and a hedge that finds no slot soon helps
	// nobody. It is not what is left of the class's max wait: the message
	// is already being sent, and a home whose sends hang may have taken
	// that wait in its in-flight cap.
	hedgeSlotWait = time.Second
)

// errHedgeLost ends a send abandoned because its hedge's other send won.
var errHedgeLost = errors.New("abandoned: the message's other send was accepted first")

// answers keeps an account's last answer times in this process, for its
// hedge bound. Safe for concurrent use; the zero value is empty.
type answers struct {
	mu   sync.Mutex
	ring [hedgeSamples]time.Duration // guarded by mu
	n    int                         // guarded by mu: answers seen, the last at ring[(n-1)%hedgeSamples]
}

// observe records a send that took took and ended in err: only an answer
// (an acceptance or a provider's error) says how fast the provider is.
func (a *answers) observe(took time.Duration, err error) {
	if err != nil && !errors.As(err, new(*provider.Error)) {
		return
	}
	a.mu.Lock()
	a.ring[a.n%hedgeSamples] = took
	a.n++
	a.mu.Unlock()
}

// hedgeAfter is how long a send waits for the account's answer before it
// is hedged: hedgeQuantile of the last answers within [HedgeFloor,
// HedgeCeiling]; HedgeCeiling before hedgeMinSamples answers.
func (a *answers) hedgeAfter() time.Duration {
	a.mu.Lock()
	if a.n < hedgeMinSamples {
		a.mu.Unlock()
		return HedgeCeiling
	}
	s := slices.Clone(a.ring[:min(a.n, hedgeSamples)])
	a.mu.Unlock()
	slices.Sort(s)
	return min(max(s[int(hedgeQuantile*float64(len(s)-1))], HedgeFloor), HedgeCeiling)
}

// hedges reports whether class is hedged from r's home: a class whose
// policy hedges (the first class), with an account after the home.
// Another class that fails over is not: a duplicate beats a loss only for
// the first class (docs/contract.md).
func (d *Dispatcher) hedges(class admission.Class, r []*account) bool {
	return d.policy(class).Hedged && len(r) > 1
}

// sendHedged sends m on r's home, which admitted it (t.decision, taking
// the id's claim), and, if the home has not answered within its bound,
// on the next account of r as well. It reports whether it hedged: if not,
// the home's try is returned unsettled, for the caller as any send.
// Hedged, both sends are settled here, each on its account; the home
// keeps the id's record of the first acceptance, and the try returned is
// that acceptance's (or, when neither was accepted, the home's). The
// other send is abandoned and waited for: nothing outlives the call.
func (d *Dispatcher) sendHedged(ctx context.Context, class admission.Class, r []*account, m Message, segments, deliveryAttempt int, prefix string, t try) (try, bool) {
	home, dec := r[0], t.decision
	homeLost, abandonHome := context.WithCancel(context.Background())
	defer abandonHome()
	homeEnd := make(chan try, 1)
	go func() {
		homeEnd <- d.sendAdmitted(ctx, class, home, m, d.resendCount(deliveryAttempt, dec), true, t, homeLost)
	}()
	timer := time.NewTimer(home.answers.hedgeAfter())
	select {
	case ht := <-homeEnd:
		timer.Stop()
		return ht, false
	case <-timer.C:
	}

	nextLost, abandonNext := context.WithCancel(context.Background())
	defer abandonNext()
	actx, stopAdmit := context.WithCancel(ctx) // the slot's wait ends with the delivery or the hedge
	defer stopAdmit()
	defer context.AfterFunc(nextLost, stopAdmit)()
	wait := hedgeSlotWait
	if !m.Deadline.IsZero() {
		wait = min(wait, m.Deadline.Sub(d.now()))
	}
	nextEnd := make(chan try, 1)
	go func() {
		none := try{account: home, home: home, outcome: nack.Denied, err: errors.New("no slot for the hedge")}
		nextEnd <- d.sendOnNext(actx, nextLost, class, nextOf(r, segments), m, segments, deliveryAttempt, prefix, wait, none)
	}()
	var ht, nt try
	homeDone, nextDone, homeFirst := false, false, false
	for !homeDone || !nextDone {
		select {
		case ht = <-homeEnd:
			homeDone = true
			if (ht.outcome == nack.Sent || ht.outcome == nack.Rejected) && !nextDone {
				homeFirst = true // the provider's answer on the message stands: the hedge is no longer needed
				abandonNext()
			}
		case nt = <-nextEnd:
			nextDone = true
			if nt.outcome == nack.Sent && !homeDone {
				abandonHome()
			}
		}
	}
	if homeFirst || ht.outcome == nack.Sent || nt.outcome != nack.Sent {
		d.settle(ctx, class, m, dec, ht)
		ht.hedged = home.Name
		return ht, true
	}
	// The next account's acceptance is the delivery's, kept in the home's
	// record. The home abandoned for want of an answer counts as a
	// timeout: a send outstanding past the bound while another account
	// answered.
	result := ht.result
	if errors.Is(ht.err, errHedgeLost) {
		result = admission.ResultTimedOut
	}
	if err := home.Limiter.Settle(context.WithoutCancel(ctx), dec, nt.record(), result, ledger.Story{}); err != nil {
		d.cfg.Logger.Warn("could not record a sent id; a redelivery could send it again", "id", m.ID, "err", err)
	}
	nt.hedged = home.Name
	return nt, true
}
