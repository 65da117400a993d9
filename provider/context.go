package provider

import "context"

type resendKey struct{}

// WithResendCount returns ctx carrying how many times this message was
// sent to the provider before, for whatever instruments the HTTP client
// (semantic convention http.request.resend_count). n <= 0 leaves ctx as is.
func WithResendCount(ctx context.Context, n int) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, resendKey{}, n)
}

// ResendCount returns the count WithResendCount put in ctx, and whether
// there is one: a first attempt has none.
func ResendCount(ctx context.Context) (int, bool) {
	n, ok := ctx.Value(resendKey{}).(int)
	return n, ok
}

// A Report is what an adapter made of one answer, for the instrument of
// its HTTP client (the provider span, the request metrics): a throttle in a
// 200 body (Vonage) must count as a throttle there too. The adapter fills
// it in after reading the answer's body and before closing it; an
// instrument reads it when the body is closed. A request that got no
// answer leaves it empty.
type Report struct {
	// Receipt is the acceptance, when the answer was one.
	Receipt Receipt
	// Err is the refusal, when the answer was one.
	Err *Error
	// Filled reports whether the adapter has read the answer.
	Filled bool
}

type reportKey struct{}

// withReport returns ctx carrying a new, empty Report.
func withReport(ctx context.Context) (context.Context, *Report) {
	r := new(Report)
	return context.WithValue(ctx, reportKey{}, r), r
}

// ReportOf returns the Report of the request whose context is ctx, or nil
// when its adapter keeps none.
func ReportOf(ctx context.Context) *Report {
	r, _ := ctx.Value(reportKey{}).(*Report)
	return r
}

// fill records what the answer meant; err is nil or an *Error.
func (r *Report) fill(rc Receipt, err error) {
	r.Filled, r.Receipt = true, rc
	if e, ok := err.(*Error); ok {
		r.Err = e
	}
}
