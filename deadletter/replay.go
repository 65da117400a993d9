package deadletter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/ledger"
)

// recordMargin is how much younger than the send-once record's lifetime a
// dead letter must be for its id's record to be trusted when it has none.
const recordMargin = time.Hour

// replayPublishTimeout bounds one republish.
const replayPublishTimeout = 30 * time.Second

// Records reads and clears the send-once records of ids
// (admission.Claims).
type Records interface {
	Forget(ctx context.Context, id string) (was ledger.Record, cleared bool, err error)
	Recorded(ctx context.Context, id string) (ledger.Record, error)
}

var _ Records = (*admission.Claims)(nil)

// ReplayOptions says what Replay reads, selects and republishes.
type ReplayOptions struct {
	Inspect
	Filter Filter
	// Topics is the topic of each class, where its dead letters are
	// republished.
	Topics map[admission.Class]string
	// Records returns the send-once records of the ids of a class to a
	// destination: those of the home of the class and the destination
	// (the first account of its route). to is "" when the data is no
	// valid message (replayed with Force). Required.
	Records func(ctx context.Context, class admission.Class, to string) (Records, error)
	// Decode is the dispatcher's reading of a message's data
	// (dispatch.Decode): the id it is sent under (standInID when the data
	// has none) and its destination, or an error when the data is no
	// valid message. Required.
	Decode func(data []byte, standInID string) (id, to string, err error)
	// WithID is the dispatcher's writer of an id into data without one
	// (dispatch.WithID): data, a valid message, with id written into it;
	// data itself when that does not give a valid message of that id.
	// Required.
	WithID func(data []byte, id string) []byte
	// Suppressed reports whether a message of class to to is stopped by
	// the suppression list, and the source of the entry that stops it;
	// nil: no list. Such a dead letter is skipped, left listed.
	Suppressed func(ctx context.Context, class admission.Class, to string) (source string, ok bool, err error)
	// MaxReplays skips a dead letter replayed this many times already; 0
	// skips every one.
	MaxReplays int
	// Force replays also what Replay cannot vouch for: malformed dead
	// letters (they come back unless the data was fixed), and those whose
	// send-once record cannot be checked (no id, or older than the
	// records).
	Force bool
	// DryRun changes nothing: every dead letter is left listed, and the
	// results say what would be done.
	DryRun bool
	// AfterRepublish, if not nil, is called after each confirmed
	// republish, before its dead letter's ack, with the number of
	// republishes so far.
	AfterRepublish func(n int)
}

// replayer is one run of Replay.
type replayer struct {
	opts   ReplayOptions
	r      *reader
	ps     *pubsub.Client
	pubs   map[string]*pubsub.Publisher // by topic
	report func(Result)

	started     time.Time // dead letters published after it are left listed
	sum         Summary
	republished int
}

// Replay republishes, to its class's topic, each dead letter opts.Filter
// selects whose cause may be fixed, and calls report with the result of
// each one selected, as it is handled. It returns what it did, and the
// error that ended the reading, if any: the dead letters it did not get to
// are left listed.
//
// It reads one dead letter at a time: what this process holds unhandled
// is what a kill would hide from the others until its lease runs out.
func Replay(ctx context.Context, ps *pubsub.Client, opts ReplayOptions, report func(Result)) (Summary, error) {
	if opts.Records == nil || opts.Decode == nil || opts.WithID == nil {
		return Summary{}, errors.New("deadletter: Replay needs Records, Decode and WithID")
	}
	opts.Filter = opts.Filter.withNow(time.Now())
	p := &replayer{opts: opts, ps: ps, pubs: map[string]*pubsub.Publisher{}, report: report, started: opts.Filter.Now,
		sum: Summary{Skipped: map[Reason]int{}, DryRun: opts.DryRun}}
	defer func() {
		for _, pub := range p.pubs {
			pub.Stop()
		}
	}()
	p.r = newReader(ps, opts.Inspect, 1)
	err := p.r.read(ctx, func(dl *Letter) { p.handle(ctx, dl) })
	p.sum.Limited = p.r.limited
	return p.sum, err
}

func (p *replayer) done(dl *Letter, what Action, why Reason, detail string) {
	switch what {
	case Replayed:
		p.sum.Replayed++
	case Skipped:
		p.sum.Skipped[why]++
	case Failed:
		p.sum.Failed++
	}
	p.report(Result{ID: dl.ID, Class: dl.Class, Action: what, Reason: why, Detail: detail, DryRun: p.opts.DryRun})
}

func (p *replayer) skip(dl *Letter, why Reason, detail string) { p.done(dl, Skipped, why, detail) }

func (p *replayer) fail(dl *Letter, detail string) { p.done(dl, Failed, "", detail) }

// handle decides what becomes of one dead letter and does it, in the
// order that loses none if the process dies between any two steps:
// checks that change nothing, then the id's send-once record (cleared
// only when it says refused), then the republish, and only once the
// republish is confirmed, the ack. A dead letter not acked is nacked back
// when reading ends.
func (p *replayer) handle(ctx context.Context, dl *Letter) {
	if !p.opts.Filter.match(dl) {
		p.sum.Skipped[SkipFiltered]++
		return
	}
	switch {
	case dl.Published.After(p.started):
		// A replay whose cause is not fixed comes back within seconds:
		// replayed again in the same run, it would use up MaxReplays.
		p.skip(dl, SkipNew, "dead-lettered after this replay started: left listed")
		return
	case strings.HasPrefix(dl.Reason, "invalid:") && !p.opts.Force:
		p.skip(dl, SkipMalformed, dl.Reason+" (it would only come back; --force replays it)")
		return
	case dl.Truncated:
		p.skip(dl, SkipTruncated, fmt.Sprintf("its data was cut from %s bytes to 64 KiB: the message is gone", dl.Attributes[attr.OriginalDataBytes]))
		return
	case dl.Replays >= p.opts.MaxReplays:
		p.skip(dl, SkipMaxReplays, fmt.Sprintf("replayed %d times already (--max-replays %d)", dl.Replays, p.opts.MaxReplays))
		return
	case dl.Class == "":
		p.skip(dl, SkipNoClass, "no class attribute: its topic is unknown")
		return
	}
	class, _ := admission.ParseClass(dl.Class)
	topic, ok := p.opts.Topics[class]
	if !ok {
		p.skip(dl, SkipUnknownClass, fmt.Sprintf("class %s is not configured (ACCOUNTS_FILE's classes): its topic is unknown", class))
		return
	}

	// The message as it will be republished, and the id it will be sent
	// under: the dispatcher's reading of it.
	data, sendID, to := dl.Data, "", ""
	if id, dest, err := p.opts.Decode(dl.Data, dl.standInID()); err == nil {
		sendID, to = id, dest
		if !dl.dataID {
			// The stand-in id is the original's Pub/Sub message ID; the
			// republished message has another, so the id is written into
			// the data: a replay repeated after a crash is then the same
			// id, which the send-once record keeps from a second send.
			// Without the original's ID (a dead letter Pub/Sub forwarded
			// itself) the id the dispatcher recorded is unknown.
			if dl.OriginalID == "" && !p.opts.Force {
				p.skip(dl, SkipNoID, "no id in its data and no original_message_id: whether it was sent cannot be checked (--force replays it)")
				return
			}
			if data = p.opts.WithID(dl.Data, sendID); bytes.Equal(data, dl.Data) && !p.opts.Force {
				p.skip(dl, SkipNoID, "its stand-in id could not be written into its data: a replay could not be checked (--force replays it)")
				return
			}
		}
	} else if dl.ID != "" {
		sendID = dl.ID // malformed, replayed with Force: its record is still checked
	}

	if to != "" && p.opts.Suppressed != nil {
		source, stopped, err := p.opts.Suppressed(ctx, class, to)
		switch {
		case err != nil:
			p.fail(dl, fmt.Sprintf("read the suppression list: %v; left listed", err))
			return
		case stopped:
			p.skip(dl, SkipSuppressed, "its number is on the suppression list (source "+source+"): never sent again")
			return
		}
	}

	note := "" // what became of the id's record
	if sendID != "" {
		var ok bool
		if note, ok = p.checkRecord(ctx, dl, class, to, sendID); !ok {
			return
		}
	}

	attrs := map[string]string{}
	for k, v := range dl.Attributes {
		if !reserved(k) && k != attr.Replays {
			attrs[k] = v
		}
	}
	attrs[attr.Replays] = strconv.Itoa(dl.Replays + 1)
	if p.opts.DryRun {
		p.done(dl, Replayed, "", fmt.Sprintf("to %s (replays %d)%s", topic, dl.Replays+1, note))
		return
	}

	pub := p.pubs[topic]
	if pub == nil {
		pub = p.ps.Publisher(topic)
		p.pubs[topic] = pub
	}
	// Not cut by ^C: once its record is cleared, the publish's outcome
	// must be known (the publisher would flush it at its Stop anyway).
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayPublishTimeout)
	serverID, err := pub.Publish(pctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(pctx)
	cancel()
	if err != nil {
		p.fail(dl, fmt.Sprintf("publish to %s: %v; left listed", topic, err))
		return
	}
	p.republished++
	if p.opts.AfterRepublish != nil {
		p.opts.AfterRepublish(p.republished)
	}
	if err := p.r.ack(ctx, dl); err != nil {
		p.fail(dl, fmt.Sprintf("republished to %s as %s, but its %v: it stays listed, and a replay finds it sent or sends it once", topic, serverID, err))
		return
	}
	p.done(dl, Replayed, "", fmt.Sprintf("to %s as %s (replays %d)%s", topic, serverID, dl.Replays+1, note))
}

// checkRecord reads, and unless this is a dry run clears, the send-once
// record of id, a message of class to to, and reports whether the replay goes on, with a note of
// what became of the record; when it does not, the dead letter was
// reported (and, found sent, acked).
func (p *replayer) checkRecord(ctx context.Context, dl *Letter, class admission.Class, to, id string) (note string, ok bool) {
	was, cleared, err := p.record(ctx, class, to, id)
	if unknown := (*ledger.UnknownRecordError)(nil); errors.As(err, &unknown) {
		p.skip(dl, SkipUnknownRecord, fmt.Sprintf("its send-once record says %q: left listed", unknown.Record))
		return "", false
	}
	if err != nil {
		p.fail(dl, "send-once record: "+err.Error())
		return "", false
	}
	switch {
	case was.State == ledger.Finished && !was.Rejected:
		if p.opts.DryRun {
			p.skip(dl, SkipSent, fmt.Sprintf("already sent (record %q): would not be republished; the dead letter would be acked", was))
			return "", false
		}
		if err := p.r.ack(ctx, dl); err != nil {
			p.fail(dl, fmt.Sprintf("already sent (record %q), not republished; its %v: it stays listed", was, err))
			return "", false
		}
		p.skip(dl, SkipSent, fmt.Sprintf("already sent (record %q): not republished; dead letter acked", was))
		return "", false
	case was.State == ledger.Held:
		p.skip(dl, SkipHeld, "being sent right now (a live send claim): left listed")
		return "", false
	case was.State == ledger.Unrecorded && time.Since(dl.Published) > admission.DefaultRecordTTL-recordMargin && !p.opts.Force:
		// The record of a dead letter this old may have said sent and
		// expired since (a replay that was killed before its ack).
		p.skip(dl, SkipExpired, fmt.Sprintf("dead-lettered %s ago, and send-once records live %s: it may have been sent since (--force replays it)",
			time.Since(dl.Published).Round(time.Minute), admission.DefaultRecordTTL))
		return "", false
	case was.State == ledger.Unrecorded:
		return "", true
	case was.State == ledger.Refused || was.Rejected:
		switch {
		case p.opts.DryRun:
			return fmt.Sprintf("; its record %q would be cleared", was), true
		case cleared:
			return fmt.Sprintf("; its record %q was cleared", was), true
		}
		// Forget clears these: a record that stays would make the replay a duplicate.
		p.skip(dl, SkipUnknownRecord, fmt.Sprintf("its send-once record %q was not cleared: left listed", was))
		return "", false
	}
	p.skip(dl, SkipUnknownRecord, fmt.Sprintf("its send-once record says %q: left listed", was))
	return "", false
}

// record reads the send-once record of id on the records of class and
// to and, unless this is a dry run, clears it when it says the provider
// refused the id (admission.Claims.Forget). It returns what the record
// said.
func (p *replayer) record(ctx context.Context, class admission.Class, to, id string) (was ledger.Record, cleared bool, err error) {
	recs, err := p.opts.Records(ctx, class, to)
	if err != nil {
		return ledger.Record{}, false, err
	}
	if p.opts.DryRun {
		was, err := recs.Recorded(ctx, id)
		return was, false, err
	}
	return recs.Forget(ctx, id)
}
