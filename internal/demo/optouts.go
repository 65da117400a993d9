package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/provider/providertest"
)

// The recipients who reply STOP mid-run (Options.OptOuts): they get every
// optOutEvery-th OTP from the start, half of them on the second account
// (its destination, optOutPrefix: it is their home), and once half the
// campaign is sent each replies STOP through the simulator's inbound
// webhook, half through each account, so that a reply through one account
// stops the sends through the other. The suppression list must stop every
// message to them admitted more than optOutBound after their STOP was
// answered (docs/suppressions.md).
const (
	// optOutEvery: every optOutEvery-th OTP goes to one of them.
	optOutEvery = 5
	// optOutPrefix is the destination of the second account.
	optOutPrefix = "+8170"
	// optOutBound is the list's promise: a change reaches every process's
	// decisions within it.
	optOutBound = time.Second
)

// OptOut is what the recipients who replied STOP mid-run were sent.
type OptOut struct {
	Recipients int
	// Through is the replies answered, by the account they came
	// through; At when the last was answered, from the start.
	Through map[string]int
	At      time.Duration
	// SentBefore: messages to them sent before their STOP was answered;
	// SentWithin: admitted within optOutBound after it; SentAfter: later,
	// which the list must make 0.
	SentBefore, SentWithin, SentAfter int
	// Stopped is the messages to them the list stopped, by the account
	// that was their home.
	Stopped map[string]int
	// Err says why a reply was not answered 200; "" when all were.
	Err string
}

// secondAccount is the run's second account: a's settings, named a's
// name with -b, serving optOutPrefix only (longest_prefix routes its
// numbers there first, a after it).
func secondAccount(a config.Account) config.Account {
	b := a
	b.Name = a.Name + "-b"
	b.Destinations = []string{optOutPrefix}
	return b
}

// optOutRecipients are n numbers of this run alone (a Redis kept from an
// earlier run holds that run's on the list): the even ones on the first
// account's destinations, the odd ones on the second's.
func optOutRecipients(n int) []string {
	out := make([]string, n)
	for k := range out {
		prefix := "+8190"
		if k%2 == 1 {
			prefix = optOutPrefix
		}
		out[k] = fmt.Sprintf("%s%08d", prefix, rand.IntN(1e8))
	}
	return out
}

// replyStop posts each recipient's STOP to the inbound webhook of the
// account it replies through (recipients 0 and 1 through the first, 2 and
// 3 through the second, and so on), signed as the simulator's provider
// signs, and tells stats when each was answered.
func (r *run) replyStop(ctx context.Context, accounts []string, recipients []string) {
	for k, number := range recipients {
		through := accounts[(k/2)%len(accounts)]
		target := r.cfg.ReceiptsPublicURL + "/v1/inbound/" + url.PathEscape(through)
		m := providertest.Inbound{ID: fmt.Sprintf("stop-%d-%d", r.start.UnixNano(), k), From: number, To: localstack.From, Body: "STOP"}
		status, _, err := r.stack.Sim.PostInbound(ctx, target, m, localstack.Token, r.cfg.Account.VonageSignatureMethod)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("answered %d", status)
		}
		r.stats.optedOut(k, through, time.Now(), err)
	}
}

// optOutReport is the report's OptOut of what s counted; nil when no
// recipient was to reply.
func (s *stats) optOutReport(start time.Time) *OptOut {
	if len(s.stopAt) == 0 {
		return nil
	}
	o := &OptOut{Recipients: len(s.stopAt), Through: maps.Clone(s.stopThrough), Stopped: maps.Clone(s.stoppedOn),
		SentBefore: s.sentBefore, SentWithin: s.sentWithin, SentAfter: s.sentAfter, Err: s.stopErr}
	for _, at := range s.stopAt {
		o.At = max(o.At, at.Sub(start))
	}
	return o
}

// printOptOut writes the report's lines of the recipients who replied
// STOP; none when none was to.
func printOptOut(w io.Writer, o *OptOut) {
	if o == nil {
		return
	}
	fmt.Fprintf(w, "  opt-outs (STOP mid-run)          %d recipients, answered by %v, through %s\n",
		o.Recipients, o.At.Round(100*time.Millisecond), byAccount(o.Through))
	fmt.Fprintf(w, "  to them after their STOP         sent %d (%d within the list's %v), stopped by the list %d (home %s); sent before it %d\n",
		o.SentAfter, o.SentWithin, optOutBound, total(o.Stopped), byAccount(o.Stopped), o.SentBefore)
	if o.Err != "" {
		fmt.Fprintf(w, "  opt-outs not answered            %s\n", o.Err)
	}
}

// byAccount is "a 2, b 2" of counts by account, sorted; "none" when empty.
func byAccount(counts map[string]int) string { return cmp.Or(countsText(counts), "none") }
