package nack

import (
	"fmt"
	"math"
	"sync"
)

// Defaults of the gRPC A6 retryThrottling policy: ten failures in a row stop
// retries after five, and ten successes buy back one retry.
const (
	DefaultMaxTokens  = 10
	DefaultTokenRatio = 0.1
)

// Budget is a retry budget by the gRPC A6 retryThrottling rule: it holds up
// to maxTokens tokens and starts full; each failure takes one token, each
// success gives back tokenRatio, and retries are allowed while more than
// half of maxTokens remain. Tokens never fall below zero nor rise above
// maxTokens.
//
// Tokens are counted in integer thousandths, as A6 prescribes three decimal
// places for tokenRatio, so a thousand successes and failures leave no
// floating-point drift.
//
// A Budget is safe for concurrent use. Its zero value is not usable: create
// one with NewBudget, one per process, shared by every delivery.
type Budget struct {
	maxMilli   int64 // immutable after NewBudget
	ratioMilli int64 // immutable after NewBudget

	mu    sync.Mutex
	milli int64 // guarded by mu; 0 <= milli <= maxMilli
}

// NewBudget returns a full Budget of maxTokens tokens that gives back
// tokenRatio tokens per success; NewBudget(DefaultMaxTokens,
// DefaultTokenRatio) is the default. Both values are rounded to thousandths.
// NewBudget panics if either is below 0.001 or not finite, which is a
// programming error, like a non-positive period for time.NewTicker.
func NewBudget(maxTokens, tokenRatio float64) *Budget {
	maxMilli := toMilli("maxTokens", maxTokens)
	return &Budget{
		maxMilli:   maxMilli,
		ratioMilli: toMilli("tokenRatio", tokenRatio),
		milli:      maxMilli,
	}
}

func toMilli(name string, v float64) int64 {
	// The upper bound keeps v*1000 inside int64; A6 itself caps maxTokens at 1000.
	if math.IsNaN(v) || v < 0.0005 || v > 1e15 {
		panic(fmt.Sprintf("nack: NewBudget: %s is %v, want a finite value of at least 0.001", name, v))
	}
	return int64(math.Round(v * 1000))
}

// OnSuccess records a send that got an answer the provider was healthy
// enough to give, and gives back tokenRatio tokens.
func (b *Budget) OnSuccess() {
	b.mu.Lock()
	b.milli = min(b.maxMilli, b.milli+b.ratioMilli)
	b.mu.Unlock()
}

// OnFailure records a failed send (Throttled or Transient) and takes one
// token.
func (b *Budget) OnFailure() {
	b.mu.Lock()
	b.milli = max(0, b.milli-1000)
	b.mu.Unlock()
}

// Allow reports whether a retry may be attempted now: whether more than
// half of maxTokens remain.
func (b *Budget) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return 2*b.milli > b.maxMilli
}

// Tokens returns how many tokens remain, for metrics and tests.
func (b *Budget) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.milli) / 1000
}
