package server

import (
	"fmt"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
	"smsdispatcher/receipts"
)

// newReceipts is the receipts' server of s when RECEIPTS_ADDR is set (nil
// otherwise): each account's adapter verifies and reads its receipts, its
// limiter folds them, the states go out on STATUS_TOPIC and the resends
// on otp's topic (resendTopic). stop flushes both publishers once the
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
		accounts = append(accounts, receipts.Account{Name: a.Setup.Name, Reader: reader, Ledger: s.limiters[i]})
	}
	status, resend := ps.Publisher(s.cfg.StatusTopic), ps.Publisher(resendTopic(s.cfg.ClassList()))
	stop = func() { status.Stop(); resend.Stop() }
	var metrics receipts.Metrics
	if s.opts.Telemetry != nil {
		metrics, _ = any(s.opts.Telemetry.Metrics).(receipts.Metrics)
	}
	srv, err := receipts.New(receipts.Config{
		Addr: s.cfg.ReceiptsAddr, PublicURL: s.cfg.ReceiptsPublicURL, Accounts: accounts,
		Status: receipts.TopicPublisher{Publisher: status}, Resend: receipts.TopicPublisher{Publisher: resend},
		Metrics: metrics, Logger: s.logger,
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

// resendTopic is where a resend goes: otp's topic (only otp is resent on
// a failed receipt), the first class's when none is named otp.
func resendTopic(classes []config.Class) string {
	for _, c := range classes {
		if c.Name == admission.OTP {
			return c.Topic
		}
	}
	return classes[0].Topic
}
