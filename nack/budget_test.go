package nack

import (
	"math"
	"sync"
	"testing"
)

func TestBudget(t *testing.T) {
	type step struct {
		failures, successes int
		wantTokens          float64 // exact: tokens are integer thousandths
		wantAllow           bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"starts full", []step{{0, 0, 10, true}}},
		{"boundary at half", []step{
			{4, 0, 6, true},
			{1, 0, 5, false}, // 5 is not more than 10/2
			{0, 1, 5.1, true},
		}},
		{"never below zero", []step{
			{10, 0, 0, false},
			{5, 0, 0, false},
			{0, 1, 0.1, false},
		}},
		{"never above max", []step{
			{0, 1000, 10, true},
			{1, 0, 9, true},
			{0, 100, 10, true},
		}},
		{"ten successes buy back one failure, without drift", []step{
			{1, 0, 9, true},
			{0, 10, 10, true},
			{6, 0, 4, false},
			{0, 10, 5, false},
			{0, 1, 5.1, true},
			{0, 49, 10, true},
		}},
		{"drained budget needs 51 successes", []step{
			{20, 0, 0, false},
			{0, 50, 5, false},
			{0, 1, 5.1, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(DefaultMaxTokens, DefaultTokenRatio)
			for i, s := range tt.steps {
				for range s.failures {
					b.OnFailure()
				}
				for range s.successes {
					b.OnSuccess()
				}
				if got := b.Tokens(); got != s.wantTokens {
					t.Errorf("step %d: Tokens() = %v, want %v", i, got, s.wantTokens)
				}
				if got := b.Allow(); got != s.wantAllow {
					t.Errorf("step %d: Allow() = %v, want %v", i, got, s.wantAllow)
				}
			}
		})
	}
}

func TestNewBudgetRounding(t *testing.T) {
	b := NewBudget(3, 0.0016) // rounds to 2 thousandths
	if got := b.Tokens(); got != 3 {
		t.Fatalf("Tokens() = %v, want 3", got)
	}
	b.OnFailure()
	b.OnSuccess()
	if got := b.Tokens(); got != 2.002 {
		t.Errorf("after one failure and one success: Tokens() = %v, want 2.002", got)
	}
	if !b.Allow() { // 2.002 > 1.5
		t.Errorf("Allow() = false, want true")
	}
	b.OnFailure() // 1.002 <= 1.5
	if b.Allow() {
		t.Errorf("Allow() at 1.002 of 3 = true, want false")
	}
}

func TestNewBudgetPanics(t *testing.T) {
	tests := []struct {
		name             string
		maxTokens, ratio float64
	}{
		{"zero max", 0, 0.1},
		{"negative ratio", 10, -0.1},
		{"ratio below a thousandth", 10, 0.0004},
		{"NaN", math.NaN(), 0.1},
		{"infinite", 10, math.Inf(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("NewBudget(%v, %v) did not panic", tt.maxTokens, tt.ratio)
				}
			}()
			NewBudget(tt.maxTokens, tt.ratio)
		})
	}
}

// TestBudgetConcurrent is for -race, and checks that no update is lost: each
// goroutine spends two tokens before it earns them back, so the total never
// reaches a bound and must end where it started.
func TestBudgetConcurrent(t *testing.T) {
	const goroutines = 100
	b := NewBudget(1000, 0.5)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			b.OnFailure()
			_ = b.Allow()
			b.OnFailure()
			for range 4 {
				b.OnSuccess()
				_ = b.Tokens()
			}
		})
	}
	wg.Wait()
	if got := b.Tokens(); got != 1000 {
		t.Errorf("Tokens() = %v, want 1000", got)
	}
}
