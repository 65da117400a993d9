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
