package priority

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// marketing starts one WaitMarketing in a goroutine and returns a channel
// that receives its result.
func marketing(ctx context.Context, g *Gate) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.WaitMarketing(ctx) }()
	return done
}

// passed reports whether the WaitMarketing behind done has returned, and
// with what. Call it after synctest.Wait.
func passed(done <-chan error) (bool, error) {
	select {
	case err := <-done:
		return true, err
	default:
		return false, nil
	}
}

func TestZeroGateIsOpen(t *testing.T) {
	var g Gate
	if err := g.WaitMarketing(t.Context()); err != nil {
		t.Errorf("WaitMarketing on an open gate = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.WaitMarketing(ctx); err != nil {
		t.Errorf("WaitMarketing on an open gate with an ended context = %v, want nil", err)
	}
	if n := g.Waiting(); n != 0 {
		t.Errorf("Waiting() = %d, want 0", n)
	}
}

// TestMarketingWaitsForEveryOTP drives one gate through a script of OTP
// entries and releases, and after each step checks whether a marketing
// message blocked since the start has passed.
func TestMarketingWaitsForEveryOTP(t *testing.T) {
	type step struct {
		op          string // "enter", "release", or "handover": release otp and enter otp+1 before marketing looks again
		otp         int    // which OTP
		wantWaiting int
		wantPassed  bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"one OTP", []step{
			{"release", 0, 0, true},
		}},
		{"released in order of entry", []step{
			{"enter", 1, 2, false},
			{"enter", 2, 3, false},
			{"release", 0, 2, false},
			{"release", 1, 1, false},
			{"release", 2, 0, true},
		}},
		{"released in reverse", []step{
			{"enter", 1, 2, false},
			{"release", 1, 1, false},
			{"release", 0, 0, true},
		}},
		{"release twice is a no-op", []step{
			{"enter", 1, 2, false},
			{"release", 0, 1, false},
			{"release", 0, 1, false},
			{"release", 1, 0, true},
			{"release", 1, 0, true},
			{"release", 0, 0, true},
		}},
		{"the gate opens and shuts before marketing runs", []step{
			{"handover", 0, 1, false},
			{"handover", 1, 1, false},
			{"release", 2, 0, true},
		}},
		{"OTP enters and leaves before the last one goes", []step{
			{"enter", 1, 2, false},
			{"release", 0, 1, false},
			{"enter", 2, 2, false},
			{"release", 1, 1, false},
			{"release", 2, 0, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var g Gate
				// A handover holds marketing, woken by the release, in
				// the hook until the next OTP has entered: the order the
				// step names, whichever goroutine the scheduler runs.
				var hold chan struct{}
				woke := make(chan struct{})
				g.woken = func() {
					if h := hold; h != nil {
						woke <- struct{}{}
						<-h
					}
				}
				releases := map[int]func(){0: g.EnterOTP()}
				done := marketing(t.Context(), &g)
				synctest.Wait()
				if ok, _ := passed(done); ok {
					t.Fatalf("marketing passed while OTP 0 was waiting")
				}
				gone := false // marketing has passed
				for i, s := range tt.steps {
					switch s.op {
					case "enter":
						releases[s.otp] = g.EnterOTP()
					case "release":
						releases[s.otp]()
					case "handover":
						hold = make(chan struct{})
						releases[s.otp]()
						<-woke
						releases[s.otp+1] = g.EnterOTP()
						close(hold)
						hold = nil
					}
					synctest.Wait()
					if n := g.Waiting(); n != s.wantWaiting {
						t.Errorf("step %d (%s %d): Waiting() = %d, want %d", i, s.op, s.otp, n, s.wantWaiting)
					}
					if gone {
						continue
					}
					ok, err := passed(done)
					switch {
					case ok && !s.wantPassed:
						t.Fatalf("step %d (%s %d): marketing passed (%v) while %d OTP waiting", i, s.op, s.otp, err, g.Waiting())
					case !ok && s.wantPassed:
						t.Fatalf("step %d (%s %d): marketing still blocked with %d OTP waiting", i, s.op, s.otp, g.Waiting())
					case ok && err != nil:
						t.Fatalf("step %d (%s %d): WaitMarketing = %v, want nil", i, s.op, s.otp, err)
					}
					gone = ok
				}
			})
		})
	}
}

func TestWaitMarketingContext(t *testing.T) {
	tests := []struct {
		name     string
		ctx      func(context.Context) (context.Context, context.CancelFunc)
		cancelAt time.Duration // when the test cancels; 0: never
		want     error
		wantAt   time.Duration
	}{
		{
			name: "deadline",
			ctx: func(p context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(p, 8*time.Second)
			},
			want:   context.DeadlineExceeded,
			wantAt: 8 * time.Second,
		},
		{
			name:     "cancel",
			ctx:      context.WithCancel,
			cancelAt: 3 * time.Second,
			want:     context.Canceled,
			wantAt:   3 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var g Gate
				release := g.EnterOTP()
				defer release()
				ctx, cancel := tt.ctx(t.Context())
				defer cancel()
				start := time.Now()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				err := g.WaitMarketing(ctx)
				if !errors.Is(err, tt.want) {
					t.Errorf("WaitMarketing = %v, want %v", err, tt.want)
				}
				if at := time.Since(start); at != tt.wantAt {
					t.Errorf("WaitMarketing returned after %v, want %v", at, tt.wantAt)
				}
				if n := g.Waiting(); n != 1 {
					t.Errorf("Waiting() = %d after a marketing timeout, want 1", n)
				}
			})
		})
	}
}

// TestOTPNeverWaits enters OTP messages while marketing messages are
// blocked at the gate and while others pass it.
func TestOTPNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		first := g.EnterOTP()
		ctx, cancel := context.WithCancel(t.Context())
		var blocked []<-chan error
		for range 50 {
			blocked = append(blocked, marketing(ctx, &g))
		}
		synctest.Wait()

		entered := make(chan struct{})
		go func() {
			for range 100 {
				g.EnterOTP()() // enter and release at once
			}
			release := g.EnterOTP()
			close(entered)
			release()
		}()
		synctest.Wait() // returns only if the goroutine above is blocked or done
		select {
		case <-entered:
		default:
			t.Fatal("EnterOTP blocked while marketing waited at the gate")
		}
		first()
		cancel()
		for i, done := range blocked {
			if err := <-done; err != nil {
				t.Errorf("marketing %d: WaitMarketing = %v, want nil (it was released before the cancel)", i, err)
			}
		}
	})
}

// TestMarketingFlood runs 100 marketing goroutines that pass the gate, work
// for a moment and come back, while OTP messages enter and leave. At every
// quiescent point with an OTP registered, it checks that no marketing
// goroutine has passed since the OTP entered, and that all of them pass once
// the last OTP leaves.
func TestMarketingFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const senders = 100
		var g Gate
		var passes atomic.Int64
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() {
				work := time.Duration(i%7+1) * time.Millisecond
				// WaitMarketing passes an open gate even with ctx ended.
				for ctx.Err() == nil && g.WaitMarketing(ctx) == nil {
					passes.Add(1)
					time.Sleep(work) // a send; fake time in the bubble
				}
			})
		}

		for round := range 20 {
			// Marketing runs free for a while.
			time.Sleep(25 * time.Millisecond)
			synctest.Wait() // quiescent: nobody is between a pass and its count
			free := passes.Load()

			// One to three OTPs enter, one at a time, with marketing active.
			var releases []func()
			for k := range round%3 + 1 {
				releases = append(releases, g.EnterOTP())
				if k == 0 {
					synctest.Wait()
					free = passes.Load()
				}
				time.Sleep(3 * time.Millisecond)
			}
			// Long enough for every sender to finish its work and reach the gate.
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if got := passes.Load(); got != free {
				t.Fatalf("round %d: %d marketing passes while %d OTP waiting", round, got-free, g.Waiting())
			}

			// Release all but the last: still closed.
			for _, release := range releases[:len(releases)-1] {
				release()
				release() // twice is safe
				synctest.Wait()
				if got := passes.Load(); got != free {
					t.Fatalf("round %d: %d marketing passes while %d OTP waiting", round, got-free, g.Waiting())
				}
			}
			releases[len(releases)-1]()
			synctest.Wait() // no fake time passes: each sender passed exactly once
			if got := passes.Load(); got != free+senders {
				t.Fatalf("round %d: %d passes after the last OTP left, want %d (every sender once)", round, got-free, senders)
			}
		}
		cancel()
		wg.Wait()
	})
}
