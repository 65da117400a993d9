package loadharness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/provider"
	"smsdispatcher/receipts"
)

// receiptsMaxCalls is the most Redis calls a verified receipt may cost,
// the flushes and sweeps of the owed events included: one call is the
// design's.
const receiptsMaxCalls = 1.05

// receiptsMaxEventLag is the longest a final's status event may take, p99,
// from its receipt's answer to Pub/Sub: the event is published at the
// fold, not by a sweep.
const receiptsMaxEventLag = time.Second

// receiptsRow is the receipts row: how the receipts were handled, what
// they cost in Redis and whether every final state made it.
type receiptsRow struct {
	Messages  int           // sent in the send phase
	SendPhase time.Duration // its length
	// Posted are the receipts the balancer forwarded (every attempt);
	// InPhase those of the receipts phase, Rate their number per second
	// from the first to the last.
	Posted, InPhase int
	Rate            float64
	Busiest         int // the most receipts of the phase in one second (from the first)
	// P50, P99 and Max are the handling times of every receipt: from the
	// request to the answer's header, as the balancer saw them.
	P50, P99, Max time.Duration
	// Answers counts the servers' answers by status (0: none came).
	Answers map[int]int
	// Outcomes counts the receipts servers' outcomes (receipts.Metrics).
	Outcomes map[string]int
	// Verified are the receipts of the receipts phase that reached Redis
	// (every answer but 400, 403, 404 and 413); Scripts and Commands what
	// Redis ran over the phase: script calls (EVALSHA), and every command,
	// those the scripts ran included (redisstats.Executed).
	Verified          int
	Scripts, Commands int64
	CallsPerReceipt   float64
	CommandsPer       float64
	// Finals are the messages whose final state a genuine receipt posted
	// and the server took (2xx); NoFinal those whose every final receipt
	// was forged (the provider never said). Lost are Finals whose state in
	// Redis is not that final one, or whose status event is missing or
	// says otherwise; Events the status topic's messages.
	Finals, NoFinal, Lost int
	Events                int
	// ForgedPosted are the forged receipts posted (every attempt's last),
	// ForgedAccepted those answered 2xx; GenuineRefused genuine receipts
	// whose last attempt was refused.
	ForgedPosted, ForgedAccepted, GenuineRefused int
	// OwedLeft are the events still owed after the servers stopped: a
	// fold whose answer Redis gave too late (answered 503) and whose
	// retry changed nothing; the sweep publishes them 30 s after.
	OwedLeft int
	// EventP50, EventP99 and EventMax are the times from a final's
	// receipt answered 2xx (the first that made the message final, as its
	// simulator saw the answer) to its status event taken by Pub/Sub (0
	// when it came before the answer); Missing are the finals with no such
	// event when the servers had stopped.
	EventP50, EventP99, EventMax time.Duration
	Missing                      int
	// Outage is how long the status topic refused publishes (no bound on
	// the events' lag then: only that none is missing).
	Outage    time.Duration
	Resends   int // resends published: marketing has none
	SentTwice int // ids the dispatchers sent again

	Failures []string
}

// finalWords are the final statuses of the simulators, in their
// providers' words, and whether each is delivered.
var finalWords = map[string]bool{
	"delivered": true, "read": true,
	"undelivered": false, "failed": false, "expired": false, "rejected": false, "canceled": false,
}

// measureReceipts measures run.
func measureReceipts(ctx context.Context, run *receiptsRun) (*receiptsRow, error) {
	r := &receiptsRow{Messages: run.spec.messages(), SendPhase: run.sendPhase, Answers: map[int]int{}, Outcomes: run.metrics.counts(), Outage: run.spec.outage,
		Resends: int(run.resends.n.Load())}
	var took []time.Duration
	var first, last time.Time
	for _, h := range run.lb.receipts() {
		r.Posted++
		r.Answers[h.status]++
		if h.status != 0 {
			took = append(took, h.took)
		}
		if !h.inPhase {
			continue
		}
		r.InPhase++
		if first.IsZero() || h.at.Before(first) {
			first = h.at
		}
		if h.at.After(last) {
			last = h.at
		}
		switch h.status {
		case 400, 403, 404, 413:
		default:
			r.Verified++
		}
	}
	slices.Sort(took)
	r.P50, r.P99 = quantile(took, 0.5), quantile(took, 0.99)
	if len(took) > 0 {
		r.Max = took[len(took)-1]
	}
	if span := last.Sub(first).Seconds(); span > 0 {
		r.Rate = float64(r.InPhase) / span
	}
	perSecond := map[int64]int{}
	for _, h := range run.lb.receipts() {
		if h.inPhase {
			perSecond[int64(h.at.Sub(first)/time.Second)]++
		}
	}
	for _, n := range perSecond {
		r.Busiest = max(r.Busiest, n)
	}
	r.Scripts, r.Commands = run.stats.Scripts(), run.stats.Executed()
	if r.Verified > 0 {
		r.CallsPerReceipt = float64(r.Scripts) / float64(r.Verified)
		r.CommandsPer = float64(r.Commands) / float64(r.Verified)
	}

	// The final state each provider id's genuine receipts said, when the
	// server took one.
	type said struct {
		final, delivered bool
		answered         time.Time // the first final answered 2xx
	}
	finals := map[string]said{}
	for _, sim := range run.sims {
		for _, p := range sim.PostedReceipts() {
			ok := p.Answer >= 200 && p.Answer < 300
			if p.Forged {
				r.ForgedPosted++
				if ok {
					r.ForgedAccepted++
				}
				continue
			}
			if !ok {
				r.GenuineRefused++
				continue
			}
			if delivered, final := finalWords[p.Status]; final {
				s := said{final: true, delivered: delivered, answered: p.At}
				if was, ok := finals[p.ProviderID]; ok && was.answered.Before(p.At) {
					s.answered = was.answered
				}
				finals[p.ProviderID] = s
			}
		}
	}

	type event struct {
		receipts.StatusEvent
		at time.Time
	}
	events := map[string][]event{}
	for _, m := range run.pubsub {
		var e receipts.StatusEvent
		if err := json.Unmarshal(m.data, &e); err != nil {
			return nil, fmt.Errorf("a status event does not decode: %w", err)
		}
		r.Events++
		events[e.ID] = append(events[e.ID], event{e, m.at})
	}

	// An event still owed is in Redis for the sweep to publish (30 s
	// after it was owed): not lost, but counted.
	owed := map[string]bool{}
	for _, lim := range run.limiters {
		folds, err := lim.Ledger().Owed(ctx, 0, 1000)
		if err != nil {
			return nil, fmt.Errorf("owed events: %w", err)
		}
		for _, f := range folds {
			owed[f.ID] = true
		}
		r.OwedLeft += len(folds)
	}

	run.log.mu.Lock()
	sent := make(map[string]string, len(run.log.sent))
	for id, account := range run.log.sent {
		sent[id] = account
	}
	r.SentTwice = run.log.twice
	run.log.mu.Unlock()
	var lags []time.Duration
	for id, account := range sent {
		i := slices.Index(run.accounts, account)
		if i < 0 {
			return nil, fmt.Errorf("message %s sent by an account not of the run: %q", id, account)
		}
		st, ok, err := run.limiters[i].Ledger().Story(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("story of %s: %w", id, err)
		}
		if !ok || len(st.ProviderIDs) == 0 {
			r.Lost++ // sent, with no story to fold its receipts into
			continue
		}
		s, told := finals[st.ProviderIDs[0]]
		if !told {
			r.NoFinal++
			continue
		}
		r.Finals++
		var first time.Time // the first event of the final state
		for _, e := range events[id] {
			if e.Status == st.Status && e.Account == account && (first.IsZero() || e.at.Before(first)) {
				first = e.at
			}
		}
		if first.IsZero() {
			r.Missing++
		} else {
			lags = append(lags, max(first.Sub(s.answered), 0))
		}
		status, known := provider.ParseDeliveryStatus(st.Status)
		if !known || !status.Final() || status.Delivered() != s.delivered || !owed[id] && first.IsZero() {
			r.Lost++
		}
	}
	slices.Sort(lags)
	r.EventP50, r.EventP99 = quantile(lags, 0.5), quantile(lags, 0.99)
	if len(lags) > 0 {
		r.EventMax = lags[len(lags)-1]
	}
	r.Failures = judgeReceipts(r)
	return r, nil
}

// judgeReceipts returns what r misses of the criterion: nothing lost,
// nothing forged taken, no genuine receipt refused, no resend, every
// final's event out by the stop and p99 within receiptsMaxEventLag of its
// receipt, at most receiptsMaxCalls Redis calls a verified receipt.
func judgeReceipts(r *receiptsRow) []string {
	var out []string
	if r.Lost > 0 {
		out = append(out, fmt.Sprintf("%d final states lost", r.Lost))
	}
	if r.ForgedAccepted > 0 {
		out = append(out, fmt.Sprintf("%d forged receipts accepted", r.ForgedAccepted))
	}
	if r.GenuineRefused > 0 {
		out = append(out, fmt.Sprintf("%d genuine receipts refused", r.GenuineRefused))
	}
	if r.Resends > 0 {
		out = append(out, fmt.Sprintf("%d resends of marketing", r.Resends))
	}
	if r.Missing > 0 {
		out = append(out, fmt.Sprintf("%d finals with no status event once the servers stopped", r.Missing))
	}
	if r.Outage == 0 && r.EventP99 > receiptsMaxEventLag {
		out = append(out, fmt.Sprintf("status events p99 %v after their receipt (at most %v)", r.EventP99, receiptsMaxEventLag))
	}
	if r.Verified == 0 || r.CallsPerReceipt > receiptsMaxCalls {
		out = append(out, fmt.Sprintf("%.3f Redis calls a receipt (at most %.2f)", r.CallsPerReceipt, receiptsMaxCalls))
	}
	return out
}

// receiptsVerdict fails the run when the row missed its criterion.
func receiptsVerdict(r *receiptsRow) error {
	if len(r.Failures) > 0 {
		return fmt.Errorf("%w: receipts: %s", errScenarioFailed, strings.Join(r.Failures, "; "))
	}
	return nil
}

// writeReceiptsTable writes the receipts row.
func writeReceiptsTable(w io.Writer, cfg *Config, rows []*receiptsRow) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "scenario receipts: %d dispatchers, each with its receipts server (receipts.Server.Run, its own listener) behind one public URL, "+
		"pstest, Redis; accounts generic (+1), twilio (+44), vonage (+81, sig %s), marketing; receipts %g/s for %v: intermediate ×2, final (%.0f%% delivered), "+
		"duplicated %.0f%%, replayed %.0f%%, out of order %.0f%%, forged %.0f%% (each refused one posted again up to %d times)\n",
		receiptsInstances, receiptsVonageSig, cfg.receiptRate, cfg.receiptsDuration, receiptsDelivered*100,
		receiptsDuplicates*100, receiptsReplayed*100, receiptsOutOfOrder*100, receiptsForged*100, receiptsRetries)
	if cfg.statusOutage > 0 {
		fmt.Fprintf(w, "the status topic refuses every publish for %v from the middle of the receipts\n", cfg.statusOutage)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "messages\tsend phase\treceipts\tin phase\treceipts/s\tbusiest 1 s\tp50\tp99\tmax\tverified\tcalls/receipt\tcommands/receipt\tfinals\tlost\tno genuine final\tevents\tforged\tforged accepted\tgenuine refused\towed left\tevent p50\tevent p99\tevent max\tno event\tverdict\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%.0f\t%d\t%s\t%s\t%s\t%d\t%.3f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t\n",
			r.Messages, r.SendPhase.Round(100*time.Millisecond), r.Posted, r.InPhase, r.Rate, r.Busiest, durMs(r.P50), durMs(r.P99), durMs(r.Max),
			r.Verified, r.CallsPerReceipt, r.CommandsPer, r.Finals, r.Lost, r.NoFinal, r.Events, r.ForgedPosted, r.ForgedAccepted,
			r.GenuineRefused, r.OwedLeft, durMs(r.EventP50), durMs(r.EventP99), durMs(r.EventMax), r.Missing, okText(len(r.Failures) == 0))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "answers %v; outcomes %v\n", r.Answers, r.Outcomes)
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "receipts misses: %s\n", strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
receipts: posts the balancer forwarded (every attempt); in phase: those after Redis's statistics were reset (the
  dispatchers stopped), receipts/s their rate from the first to the last, busiest 1 s the most in one second;
  p50, p99, max: request → answer header.
verified: receipts of the phase that reached Redis (not 400/403); calls/receipt: Redis's script calls (EVALSHA, the
  owed events' flushes and sweeps included) per verified receipt; commands/receipt: every command Redis ran, those
  of the scripts included. finals: messages a genuine final receipt was taken for; lost: of them, a state in Redis
  that is not that final, or neither a status event saying it nor the event owed in Redis; no genuine final: every
  final receipt forged. owed left: events still owed when the servers stopped (a fold Redis answered after the
  call's timeout, answered 503, its retry a duplicate): the sweep publishes them once owed for 30 s.
event p50, p99, max: from a final's first receipt answered 2xx (as its simulator saw the answer) to its status event
  taken by Pub/Sub (0 when before the answer); no event: finals with no status event once the servers had stopped.
verdict: nothing lost, no forged receipt accepted, no genuine one refused, every final's event out, event p99 ≤ %v
  (not with --status-outage), calls/receipt ≤ %.2f.

`, receiptsMaxEventLag, receiptsMaxCalls)
	return err
}

// quantile returns the nearest-rank q-quantile of sorted; 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// msText is d in milliseconds.
func durMs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
