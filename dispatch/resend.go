package dispatch

import (
	"errors"
	"strings"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
)

// The receipts' side of the pipeline: a resend's route, without the
// accounts that sent it before. The story a sent message's record keeps
// for its receipts is the settle step's (settle.go).

// The Pub/Sub attributes of a resend (docs/contract.md section 2) are
// named in internal/attr, which the receipts read too.

// maxResendReason bounds Event.ResendReason: the attribute crosses the
// topic like a producer's, and goes on the trace.
const maxResendReason = 64

// errResendNoAccount is why a resend is acked unsent: every account of
// its route is one it must avoid.
var errResendNoAccount = errors.New("resend_no_account: every account on its route sent it before")

// resendRoute returns r, msg's route, without the accounts the delivery m
// must avoid as a resend, and why it is resent ("" when it is not one). A
// resend is never resent again; another first-class message with
// ResendOnFailure gets its data as msg.resend when receipts are on.
func (d *Dispatcher) resendRoute(class admission.Class, m *pubsub.Message, msg *Message, r []*account) ([]*account, string) {
	avoid, ok := m.Attributes[attr.ResendAvoid]
	if !ok {
		if d.cfg.Receipts && d.policy(class).Resent && msg.ResendOnFailure {
			msg.resend = m.Data
		}
		return r, ""
	}
	msg.resent = true
	return avoiding(r, avoid), resendReason(m.Attributes[attr.ResendReason])
}

// avoiding returns the accounts of r not named in avoid, a comma-separated
// list of names, in r's order.
func avoiding(r []*account, avoid string) []*account {
	names := strings.Split(avoid, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
	}
	named := func(a *account) bool {
		for _, n := range names {
			if n != "" && n == a.Name { // an unnamed account (Deps' one) is never named
				return true
			}
		}
		return false
	}
	var out []*account
	for _, a := range r {
		if !named(a) {
			out = append(out, a)
		}
	}
	return out
}

// resendReason is s cut to maxResendReason bytes of printable ASCII, the
// rest dropped.
func resendReason(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < maxResendReason; i++ {
		if s[i] >= 0x20 && s[i] <= 0x7e {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
