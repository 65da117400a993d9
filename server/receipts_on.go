package server

import (
	"fmt"
	"slices"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
	"smsdispatcher/receipts"
)

// newReceipts is the receipts' server of s when RECEIPTS_ADDR is set (nil
// otherwise): each account's adapter verifies and reads its receipts, its
// limiter folds them, the states go out on STATUS_TOPIC and the resends
// on the resent class's topic (resendTopic). stop flushes both publishers once the
// server's Run has returned.
func (s *Server) newReceipts(ps *pubsub.Client) (r Receipts, stop func(), err error) {
	if !s.cfg.ReceiptsOn() {
		return nil, func() {}, nil
	}
	var accounts []receipts.Account
	for i, a := range s.accounts {
		reader, ok := a.Sender.(provider.ReceiptReader)
		if !ok {
			return nil, nil, fmt.Errorf("receipts: the adapter of account %s reads no receipts", a.Setup.Name)
		}
		accounts = append(accounts, receipts.Account{Name: a.Setup.Name, Reader: reader, Ledger: s.limiters[i].Ledger()})
	}
	status, resend := s.status, ps.Publisher(resendTopic(s.cfg.Process))
	stop = resend.Stop // the status publisher is the Server's
	var metrics receipts.Metrics
	if s.opts.Telemetry != nil {
		metrics, _ = any(s.opts.Telemetry.Metrics).(receipts.Metrics)
	}
	srv, err := receipts.New(receipts.Config{
		Addr: s.cfg.ReceiptsAddr, PublicURL: s.cfg.ReceiptsPublicURL, Accounts: accounts,
		Status: receipts.TopicPublisher{Publisher: status}, Resend: receipts.TopicPublisher{Publisher: resend},
		Inbound: s.list,
		Metrics: metrics, Logger: s.logger, Deadline: dispatch.PayloadDeadline,
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return srv, stop, nil
}

// receiptsDispatch has the dispatcher keep each sent message's story for
// its receipts when on.
func receiptsDispatch(c *dispatch.Config, on bool) { c.Receipts = on }

// resendTopic is where a resend goes: the topic of the class whose policy
// resends it on a failed receipt (otp), the first class's when none does
// (its publisher then idles).
func resendTopic(p config.Process) string {
	classes := p.ClassList()
	return classes[max(slices.IndexFunc(classes, func(c config.Class) bool { return p.Policy(c.Name).Resent }), 0)].Topic
}
