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
	OwedLeft  int
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
	r := &receiptsRow{Messages: run.spec.messages(), SendPhase: run.sendPhase, Answers: map[int]int{}, Outcomes: run.metrics.counts(),
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
	type said struct{ final, delivered bool }
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
				finals[p.ProviderID] = said{final: true, delivered: delivered}
			}
		}
	}

	events := map[string][]receipts.StatusEvent{}
	for _, m := range run.pubsub {
		var e receipts.StatusEvent
		if err := json.Unmarshal(m.data, &e); err != nil {
			return nil, fmt.Errorf("a status event does not decode: %w", err)
		}
		r.Events++
		events[e.ID] = append(events[e.ID], e)
	}

	// An event still owed is in Redis for the sweep to publish (30 s
	// after it was owed): not lost, but counted.
	owed := map[string]bool{}
	for _, lim := range run.limiters {
		folds, err := lim.Owed(ctx, 0, 1000)
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
	for id, account := range sent {
		i := slices.Index(run.accounts, account)
		if i < 0 {
			return nil, fmt.Errorf("message %s sent by an account not of the run: %q", id, account)
		}
		st, ok, err := run.limiters[i].Story(ctx, id)
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
		status, known := provider.ParseDeliveryStatus(st.Status)
		if !known || !status.Final() || status.Delivered() != s.delivered ||
			!owed[id] && !slices.ContainsFunc(events[id], func(e receipts.StatusEvent) bool { return e.Status == st.Status && e.Account == account }) {
			r.Lost++
		}
	}
	r.Failures = judgeReceipts(r)
	return r, nil
}

// judgeReceipts returns what r misses of the criterion: nothing lost,
// nothing forged taken, no genuine receipt refused, no resend, at most receiptsMaxCalls Redis calls a verified receipt.
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "messages\tsend phase\treceipts\tin phase\treceipts/s\tbusiest 1 s\tp50\tp99\tmax\tverified\tcalls/receipt\tcommands/receipt\tfinals\tlost\tno genuine final\tevents\tforged\tforged accepted\tgenuine refused\towed left\tverdict\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%.0f\t%d\t%s\t%s\t%s\t%d\t%.3f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			r.Messages, r.SendPhase.Round(100*time.Millisecond), r.Posted, r.InPhase, r.Rate, r.Busiest, durMs(r.P50), durMs(r.P99), durMs(r.Max),
			r.Verified, r.CallsPerReceipt, r.CommandsPer, r.Finals, r.Lost, r.NoFinal, r.Events, r.ForgedPosted, r.ForgedAccepted,
			r.GenuineRefused, r.OwedLeft, okText(len(r.Failures) == 0))
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
verdict: nothing lost, no forged receipt accepted, no genuine one refused, calls/receipt ≤ %.2f.

`, receiptsMaxCalls)
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
