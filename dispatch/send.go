package dispatch

import (
	"context"
	"errors"
	"strconv"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/suppress"
)

// The send step: one try at the provider, and what its answer asks of the
// process (judge). The caller settles the id's record (settle.go).

// sendAdmitted sends m on account a, which admitted it (t.decision), and
// returns what came of it; the caller settles. failover says m can go on
// to another account if a fails. A send still waiting for its answer when
// lost ends (nil: never) is abandoned: a hedge's other send won
// (hedge.go); it ends errHedgeLost and says nothing of a's health.
func (d *Dispatcher) sendAdmitted(ctx context.Context, class admission.Class, a *account, m Message, resends int, failover bool, t try, lost context.Context) try {
	t.admitted, t.account = d.now(), a
	if d.expired(m) {
		t.outcome = nack.Expired // the slot goes unused: cheaper than a send nobody waits for
		return t
	}
	if d.refused(ctx, class, m, t.home, &t) {
		return t // put on the list or blocked while it waited for its slot: the slot goes unused
	}
	var sendErr error
	version := a.credentialVersion()
	t.resends = resends
	start := time.Now()
	d.guardSent(class, m)
	t.receipt, sendErr = d.send(ctx, a, m, t.decision.Sender, t.resends, lost)
	if sendErr != nil && lost != nil && lost.Err() != nil {
		t.outcome, t.result, t.err = nack.Transient, admission.ResultNone, errHedgeLost
		return t
	}
	a.answers.observe(time.Since(start), sendErr)
	t.outcome, t.result, t.err = d.judge(ctx, class, a, m, version, failover, sendErr)
	if t.outcome == nack.Suppressed {
		d.optedOut(ctx, a, m)
		t.suppressed = suppress.SourceProvider
	}
	return t
}

// send sends m once, resends being the provider attempts before this one
// (the trace's resend count), and returns the provider's answer. The send
// keeps the delivery's values (its span) but not its cancellation: a
// shutdown stops waiting, not sending; Grace ends sends (d.hard), and so
// does lost (nil: never), when another account's send of m won.
func (d *Dispatcher) send(ctx context.Context, a *account, m Message, from string, resends int, lost context.Context) (provider.Receipt, error) {
	timeout := d.cfg.SendTimeout
	if !m.Deadline.IsZero() {
		timeout = min(timeout, m.Deadline.Sub(d.now()))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	stop := context.AfterFunc(d.hard, cancel)
	defer stop()
	if lost != nil {
		stopLost := context.AfterFunc(lost, cancel)
		defer stopLost()
	}
	return a.Sender.Send(provider.WithResendCount(sctx, resends),
		provider.Message{ID: m.ID, To: m.To, Body: m.Body, Deadline: m.Deadline, From: from})
}

// judge turns the provider's answer into the delivery's outcome and does
// what it asks of the process: a success refills the retry budget, a 429
// stops every process for its Retry-After, an account-level failure stops
// every process for AccountPause, a transient failure spends the budget
// and, once it is spent, pauses the class's pulls. A send cut off by its
// own deadline or by the shutdown's Grace is not the provider's failure
// and charges nothing. version is the credential's when the send began.
// A class that can fail over from a is not paused: the account's health
// sends it elsewhere, and probes alone go to a meanwhile. The SendResult
// is what the answer says of the account's health.
func (d *Dispatcher) judge(ctx context.Context, class admission.Class, a *account, m Message, version uint64, failover bool, err error) (nack.Outcome, admission.SendResult, error) {
	v := nack.Judge(err)
	switch {
	case v.Outcome == nack.Transient && d.expired(m):
		return nack.Expired, admission.ResultNone, nil
	case v.Outcome == nack.Transient && d.hard.Err() != nil:
		return nack.ShuttingDown, admission.ResultNone, err
	}
	result := admission.ResultNone
	switch v.Outcome {
	case nack.Sent:
		result = admission.ResultOK
		d.budget.OnSuccess()
		d.laneOf[class].succeeded()
	case nack.Rejected, nack.Suppressed:
		result = admission.ResultOK // the provider answered
	case nack.Throttled:
		d.budget.OnFailure() // the penalty stops sends; a spent budget also stops pulls
		if terr := a.Limiter.ReportThrottled(context.WithoutCancel(ctx), v.RetryAfter); terr != nil {
			d.cfg.Logger.Warn("could not share a 429 penalty; this process honours it alone", "account", a.Name, "retry_after", v.RetryAfter, "err", terr)
		}
	case nack.AccountFailure:
		d.accountFailed(ctx, a, version, err)
		d.holdPaused()
	case nack.Transient:
		result = admission.ResultFailed
		if errors.Is(err, context.DeadlineExceeded) {
			result = admission.ResultTimedOut // the send's own timeout: the message's deadline is checked above
		}
		d.budget.OnFailure()
		if !d.budget.Allow() && !failover {
			d.laneOf[class].pause()
		}
	}
	return v.Outcome, result, err
}

// holdPaused stops the pulls of each class whose every account is paused,
// until a pause is over.
func (d *Dispatcher) holdPaused() {
	for _, l := range d.lanes {
		if _, _, ok := d.classPause(l.class); ok {
			l.hold()
		}
	}
}

// accountLogEvery spaces the error log of account-level failures: one line
// a minute per process says it all; the metrics count every one.
const accountLogEvery = time.Minute

// accountFailed stops every process on the account for AccountPause: the
// provider refused the account, and every message would meet the same
// answer. A send made with a credential that has changed since (read again
// by the adapter or the watcher) says nothing of the new one: no pause.
func (d *Dispatcher) accountFailed(ctx context.Context, a *account, version uint64, err error) {
	if a.Credentials != nil {
		if _, rerr := a.Credentials.Reload(); rerr == nil && a.Credentials.Version() != version {
			d.cfg.Logger.Info("the provider refused a credential that has since changed; the next send uses the new one")
			return
		}
	}
	why := accountWhy(err)
	perr := a.Limiter.ReportAccountFailure(context.WithoutCancel(ctx), d.cfg.AccountPause, why)
	if perr == nil && a.Credentials != nil && a.Credentials.Version() != version {
		// The credential changed while this refusal was on its way, and
		// the watcher may have ended the pause just before this report
		// began it again: end it, the next send uses the new credential.
		if rerr := a.Limiter.ResumeAccount(context.WithoutCancel(ctx)); rerr == nil {
			return
		}
	}
	now := time.Now().UnixNano()
	last := a.logged.Load()
	if now-last < int64(accountLogEvery) || !a.logged.CompareAndSwap(last, now) {
		return
	}
	d.cfg.Logger.Error("the provider refused the account: sending stopped on it; messages wait (nacked), none is dead-lettered; fix the credential or the account",
		"account", a.Name, "reason", why, "pause", d.cfg.AccountPause, "err", err, "pause_shared", perr == nil)
}

// accountWhy is the short reason kept with an account pause: the
// provider's status and code, never its message text.
func accountWhy(err error) string {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return "account"
	}
	why := "status " + strconv.Itoa(pe.Status)
	if pe.Provider != "" {
		why = pe.Provider + " " + why
	}
	if pe.Code != "" {
		why += " code " + pe.Code
	}
	return why
}
