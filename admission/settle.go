package admission

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"smsdispatcher/ledger"
)

// A Claim asks an admission to take, in the same Redis call as the slot,
// the send-once claim of a message id: a duplicate takes no slot, and a
// denial writes no claim.
type Claim struct {
	// ID is the message's id.
	ID string
	// Token names this delivery attempt; it is unique per attempt.
	Token string
	// TTL is how long the claim outlives the slot's opening: longer than
	// the send. Zero means DefaultClaimTTL.
	TTL time.Duration
	// Count counts this send in the id's record, and asks for the sends
	// counted before it (Decision.Attempts): for a resend count where
	// Pub/Sub keeps none.
	Count bool
	// Failover says the caller can send elsewhere: a Degraded account
	// denies it at once (ReasonDegraded) instead of making it wait for a
	// probe, and leaves its probes to callers that cannot. A skipped
	// route denies only such a caller: one that cannot send elsewhere is
	// never skipped.
	Failover bool
	// Hedged says the caller also hedges the send (with Failover): it
	// sends through another account if this one has not answered within
	// a bound of its own. A Degraded account then admits it as a probe
	// once HealthRule.HedgedProbeEvery has passed since the last one,
	// rather than a probe interval later than other callers.
	Hedged bool
	// Prefix is the destination's country code ("+62"): a first-class
	// send to a prefix whose route the account skips (RouteRule) is
	// denied, ReasonRouteSkipped, but for its probes, when Failover. ""
	// skips nothing; other classes ignore it.
	Prefix string
}

// Settle is the one call after a send, and the one undo of an admission:
// it writes the id's record of what became of it (RecordSent, SentRecord's,
// RefusedRecord's), or with record "" gives back the claim d took so that a
// retry can claim the id at once, ends d's in-flight lease (in Redis or
// in the fallback), with any whose admission reply or release was lost
// before, and counts result in the account's health (Health). A zero
// Decision ends only those. A claim Redis did not hear given back is given
// back once it answers again; a lease, with the next Settle, past that it
// expires after LeaseTTL.
//
// When record is a sent record (RecordSent, SentRecord's) and
// s.ProviderIDs is not empty, Settle also keeps s (the zero Story keeps
// nothing) in the same finish.lua call: the message's story at its first part's provider id
// ({sms:<account>}:pid:<provider id>), a key per later part pointing
// there (and the id's, {sms:<account>}:msg:<id>, when the record does not
// name the story: no claim, a resend's record), living as the record
// (Config.RecordTTL), and s.Resend in {sms:<account>}:resend:<id> until
// s.ResendUntil. It works with and without a claim (an overflow account's
// admission has none: the story lives on the account that sent), and
// needs the message's id from d (Claim.ID given to Admit): without it the
// send is settled, the story is not kept, and the error says so.
func (l *Limiter) Settle(ctx context.Context, d Decision, record string, result SendResult, s ledger.Story) error {
	if record != "" && !ledger.IsSent(record) && !ledger.IsRefused(record) {
		return errors.New("admission: Settle wants \"\", RecordSent, a SentRecord or a RefusedRecord")
	}
	sent := ledger.IsSent(record)
	counted := sent && d.units > 0 // Redis admitted it: Redis counts it
	var lost error
	if s.ID == "" {
		s.ID = d.id
	}
	if sent && len(s.ProviderIDs) > 0 && s.ID == "" {
		s, lost = ledger.Story{}, errors.New("admission: a story without the message's id (Claim.ID at Admit) is not kept")
	}
	story := sent && len(s.ProviderIDs) > 0
	lease := d.Lease
	if lease == localLease {
		l.mu.Lock()
		l.localInFlight = max(0, l.localInFlight-1)
		l.mu.Unlock()
		if !d.Claimed && !counted && !story {
			return lost
		}
		lease = ""
	}
	// Without a claim finish.lua writes no record: its record key must
	// share the leases' slot, and is left alone.
	a := l.base
	call := finishCall{Record: a.Leases, Leases: a.Leases, Health: a.Health, Millis: l.claims.recordTTL.Milliseconds(),
		Result: result.arg(d.Health), Rule: l.healthRule, Ended: l.takeOrphans(lease)}
	if (result == ResultFailed || result == ResultTimedOut) && !d.at.IsZero() && call.Result != "" {
		// finish.lua does not count a failure of a send begun before
		// the account last changed state.
		call.Result += " " + strconv.FormatInt(max(l.clock.Now().Sub(d.at).Microseconds(), 0), 10)
	}
	if d.Claimed {
		call.Record, call.Value, call.Token = l.claims.Key(d.claim.ID), record, d.claim.Token
	}
	if counted {
		// The sends counter of the second of the process's clock, which
		// `dispatcher status` reads: pods' clocks agree within far less.
		call.Counter, call.Units = l.key.Sent(d.class.String(), l.clock.Now().Unix()), d.units
	}
	if story {
		l.withStory(&call, d, record, s)
		call.SentMillis = d.slotMS
	}
	if !d.Claimed && !counted && !story && len(call.Ended) == 0 && call.Result == "" {
		return lost
	}
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		v, err := finishScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Int64Slice()
		if err != nil {
			return fmt.Errorf("finish %.16s: %w", record, err)
		}
		if len(v) == 2 && call.Result != "" {
			l.setHealth(Health(v[1]))
		}
		return nil
	})
	if err != nil {
		if d.Claimed && record == "" {
			l.claims.keep(claimRef{d.claim.ID, d.claim.Token})
		}
		for _, m := range call.Ended {
			l.orphan(m)
		}
		return err
	}
	return lost
}

// takeOrphans returns the leases lost before, and lease when not empty, to
// end now.
func (l *Limiter) takeOrphans(lease string) []string {
	l.mu.Lock()
	ended := l.orphans
	l.orphans = nil
	l.mu.Unlock()
	if lease != "" {
		ended = append(ended, lease)
	}
	return ended
}

// orphan keeps lease for the next Settle.
func (l *Limiter) orphan(lease string) {
	l.mu.Lock()
	l.orphans = keepLeftovers(l.orphans, lease)
	l.mu.Unlock()
}

// withStory adds s, the story of message s.ID, to c, the finish.lua call
// of d's send writing record: the story at its first part's key, each
// later part's key pointing there, and, when a reader by id cannot follow
// the record to it, the id's key pointing there too.
func (l *Limiter) withStory(c *finishCall, d Decision, record string, s ledger.Story) {
	id := s.ID
	c.Resend, c.ID, c.Class, c.Sender = l.key.Resend(id), id, s.Class, s.Sender
	if k := l.classes[Class(s.Class)]; k != nil && k.policy.SkipsFailingRoute && !l.cfg.Route.Off() {
		c.Prefix = routeOf(s.Prefix, s.To)
	}
	named := false // the record names a part's provider id
	for _, p := range s.ProviderIDs {
		if p != "" && len(c.Parts) < ledger.MaxParts {
			c.Parts = append(c.Parts, ledger.PIDKey(l.key, p))
			named = named || record == ledger.SentRecord(p)
		}
	}
	// A reader by id (story.lua, the sweep) reads the id's record here and
	// the key of the provider id it names. A send whose record is not here
	// (an overflow account's), is another id's (a resend's), or names none
	// of the parts keeps the id's key instead: one SET more, on those only.
	if !d.Claimed || d.claim.ID != id || !named {
		c.Msg, c.ByID = l.key.Msg(id), true
	}
	if len(s.Resend) > 0 && !s.ResendUntil.IsZero() {
		// finish.lua keeps no payload whose lifetime is below 1 ms, nor
		// one past the story's (a far deadline would leave it alone).
		c.ResendData, c.ResendMillis = string(s.Resend), min(s.ResendUntil.Sub(l.clock.Now()), l.claims.recordTTL).Milliseconds()
	}
}
