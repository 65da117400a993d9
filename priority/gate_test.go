package priority

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The classes of the tests, in priority order.
const (
	otp           = 0
	transactional = 1
	marketing     = 2
)

// wait starts one Wait of class pos in a goroutine and returns a channel
// that receives its result.
func wait(ctx context.Context, g *Gate, pos int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.Wait(ctx, pos) }()
	return done
}

// passed reports whether the Wait behind done has returned, and with
// what. Call it after synctest.Wait.
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
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for pos := range 3 {
		if err := g.Wait(t.Context(), pos); err != nil {
			t.Errorf("Wait(%d) on an open gate = %v, want nil", pos, err)
		}
		if err := g.Wait(ended, pos); err != nil {
			t.Errorf("Wait(%d) on an open gate with an ended context = %v, want nil", pos, err)
		}
		if n := g.Waiting(pos); n != 0 {
			t.Errorf("Waiting(%d) = %d, want 0", pos, n)
		}
		if n := g.Ahead(pos); n != 0 {
			t.Errorf("Ahead(%d) = %d, want 0", pos, n)
		}
	}
}

// TestLaterClassWaitsForEveryEarlier drives one gate through a script of
// entries and releases of an earlier class, and after each step checks
// whether a message of a later class blocked since the start has passed:
// for the first class over the last, the first over the middle, and the
// middle over the last.
func TestLaterClassWaitsForEveryEarlier(t *testing.T) {
	type step struct {
		op          string // "enter", "release", or "handover": release msg and enter msg+1 before the later class looks again
		msg         int    // which message of the earlier class
		wantWaiting int
		wantPassed  bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"one message", []step{
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
		{"the gate opens and shuts before the later class runs", []step{
			{"handover", 0, 1, false},
			{"handover", 1, 1, false},
			{"release", 2, 0, true},
		}},
		{"one enters and leaves before the last one goes", []step{
			{"enter", 1, 2, false},
			{"release", 0, 1, false},
			{"enter", 2, 2, false},
			{"release", 1, 1, false},
			{"release", 2, 0, true},
		}},
	}
	pairs := []struct {
		name           string
		earlier, later int
	}{
		{"otp over marketing", otp, marketing},
		{"otp over transactional", otp, transactional},
		{"transactional over marketing", transactional, marketing},
	}
	for _, pair := range pairs {
		for _, tt := range tests {
			t.Run(pair.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var g Gate
					// A handover holds the later message, woken by the
					// release, in the hook until the next earlier one has
					// entered: the order the step names, whichever
					// goroutine the scheduler runs.
					var hold chan struct{}
					woke := make(chan struct{})
					g.woken = func() {
						if h := hold; h != nil {
							woke <- struct{}{}
							<-h
						}
					}
					releases := map[int]func(){0: g.Enter(pair.earlier)}
					done := wait(t.Context(), &g, pair.later)
					synctest.Wait()
					if ok, _ := passed(done); ok {
						t.Fatalf("class %d passed while message 0 of class %d was waiting", pair.later, pair.earlier)
					}
					gone := false // the later message has passed
					for i, s := range tt.steps {
						switch s.op {
						case "enter":
							releases[s.msg] = g.Enter(pair.earlier)
						case "release":
							releases[s.msg]()
						case "handover":
							hold = make(chan struct{})
							releases[s.msg]()
							<-woke
							releases[s.msg+1] = g.Enter(pair.earlier)
							close(hold)
							hold = nil
						}
						synctest.Wait()
						if n := g.Waiting(pair.earlier); n != s.wantWaiting {
							t.Errorf("step %d (%s %d): Waiting(%d) = %d, want %d", i, s.op, s.msg, pair.earlier, n, s.wantWaiting)
						}
						if n := g.Ahead(pair.later); n != s.wantWaiting {
							t.Errorf("step %d (%s %d): Ahead(%d) = %d, want %d", i, s.op, s.msg, pair.later, n, s.wantWaiting)
						}
						if gone {
							continue
						}
						ok, err := passed(done)
						switch {
						case ok && !s.wantPassed:
							t.Fatalf("step %d (%s %d): the later class passed (%v) while %d earlier waiting", i, s.op, s.msg, err, g.Waiting(pair.earlier))
						case !ok && s.wantPassed:
							t.Fatalf("step %d (%s %d): the later class still blocked with %d earlier waiting", i, s.op, s.msg, g.Waiting(pair.earlier))
						case ok && err != nil:
							t.Fatalf("step %d (%s %d): Wait = %v, want nil", i, s.op, s.msg, err)
						}
						gone = ok
					}
				})
			})
		}
	}
}

// TestMiddleClass: the middle class waits for the first and holds the
// last; a later class's messages hold no earlier class; and a message
// woken by the middle class's release looks again and waits for a first
// class message that entered in between.
func TestMiddleClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		hold := make(chan struct{})
		woke := make(chan struct{})
		holding := false // set only while the test goroutine is the only one running
		g.woken = func() {
			if holding {
				woke <- struct{}{}
				<-hold
			}
		}
		// A later class entered holds no earlier one.
		lateRelease := g.Enter(marketing)
		for _, pos := range []int{otp, transactional} {
			if err := g.Wait(t.Context(), pos); err != nil {
				t.Fatalf("Wait(%d) with only a later class waiting = %v, want nil", pos, err)
			}
		}
		lateRelease()

		otpRelease := g.Enter(otp)
		if err := g.Wait(t.Context(), otp); err != nil {
			t.Fatalf("Wait(otp) with an otp waiting = %v, want nil: the first class never waits", err)
		}
		mid := wait(t.Context(), &g, transactional)
		midRelease := g.Enter(transactional)
		last := wait(t.Context(), &g, marketing)
		synctest.Wait()
		if ok, _ := passed(mid); ok {
			t.Fatal("transactional passed while an otp was waiting")
		}
		if ok, _ := passed(last); ok {
			t.Fatal("marketing passed while an otp and a transactional were waiting")
		}
		if n := g.Ahead(marketing); n != 2 {
			t.Errorf("Ahead(marketing) = %d, want 2", n)
		}

		otpRelease()
		synctest.Wait()
		if ok, err := passed(mid); !ok || err != nil {
			t.Fatalf("transactional after the otp left: passed %v (%v), want passed", ok, err)
		}
		if ok, _ := passed(last); ok {
			t.Fatal("marketing passed while a transactional was waiting")
		}

		// The transactional leaves; before marketing looks again an otp
		// enters: marketing waits for it too.
		holding = true
		midRelease()
		<-woke
		otpRelease = g.Enter(otp)
		holding = false
		close(hold)
		synctest.Wait()
		if ok, _ := passed(last); ok {
			t.Fatal("marketing passed with an otp that entered while it was woken")
		}
		otpRelease()
		synctest.Wait()
		if ok, err := passed(last); !ok || err != nil {
			t.Fatalf("marketing with nothing ahead: passed %v (%v), want passed", ok, err)
		}
	})
}

func TestWaitContext(t *testing.T) {
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
		for _, earlier := range []int{otp, transactional} {
			t.Run(fmt.Sprintf("%s/class %d ahead", tt.name, earlier), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var g Gate
					release := g.Enter(earlier)
					defer release()
					ctx, cancel := tt.ctx(t.Context())
					defer cancel()
					start := time.Now()
					if tt.cancelAt > 0 {
						time.AfterFunc(tt.cancelAt, cancel)
					}
					err := g.Wait(ctx, marketing)
					if !errors.Is(err, tt.want) {
						t.Errorf("Wait = %v, want %v", err, tt.want)
					}
					if at := time.Since(start); at != tt.wantAt {
						t.Errorf("Wait returned after %v, want %v", at, tt.wantAt)
					}
					if n := g.Waiting(earlier); n != 1 {
						t.Errorf("Waiting(%d) = %d after a later class's timeout, want 1", earlier, n)
					}
				})
			})
		}
	}
}

// TestFirstClassNeverWaits enters and waits first-class messages while
// messages of both later classes are blocked at the gate and entered.
func TestFirstClassNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Gate
		first := g.Enter(otp)
		held := []func(){g.Enter(transactional), g.Enter(marketing)}
		ctx, cancel := context.WithCancel(t.Context())
		var blocked []<-chan error
		for i := range 50 {
			blocked = append(blocked, wait(ctx, &g, transactional+i%2))
		}
		synctest.Wait()

		entered := make(chan struct{})
		go func() {
			for range 100 {
				release := g.Enter(otp)
				if err := g.Wait(ctx, otp); err != nil {
					panic(err) // never: the first class does not wait
				}
				release()
			}
			release := g.Enter(otp)
			close(entered)
			release()
		}()
		synctest.Wait() // returns only if the goroutine above is blocked or done
		select {
		case <-entered:
		default:
			t.Fatal("the first class blocked while later classes waited at the gate")
		}
		for _, release := range held {
			release()
		}
		first()
		cancel()
		for i, done := range blocked {
			if err := <-done; err != nil {
				t.Errorf("waiter %d: Wait = %v, want nil (it was released before the cancel)", i, err)
			}
		}
	})
}

// TestFlood runs 100 goroutines of the later classes that pass the gate,
// work for a moment and come back, while messages of an earlier class (otp
// or transactional, by round) enter and leave. At every quiescent point
// with one registered, it checks that no goroutine of a class after it has
// passed since it entered, and that all of them pass once the last leaves.
func TestFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const senders = 100 // half transactional, half marketing
		var g Gate
		var passes [3]atomic.Int64 // by class
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range senders {
			pos := transactional + i%2
			wg.Go(func() {
				work := time.Duration(i%7+1) * time.Millisecond
				// Wait passes an open gate even with ctx ended.
				for ctx.Err() == nil && g.Wait(ctx, pos) == nil {
					passes[pos].Add(1)
					time.Sleep(work) // a send; fake time in the bubble
				}
			})
		}
		// held counts the passes of the classes after earlier.
		held := func(earlier int) int64 {
			n := int64(0)
			for pos := earlier + 1; pos < len(passes); pos++ {
				n += passes[pos].Load()
			}
			return n
		}

		for round := range 20 {
			earlier := round % 2 // otp, then transactional
			heldSenders := int64(senders)
			if earlier == transactional {
				heldSenders = senders / 2
			}
			// The senders run free for a while.
			time.Sleep(25 * time.Millisecond)
			synctest.Wait() // quiescent: nobody is between a pass and its count
			free := held(earlier)

			// One to three enter, one at a time, with the senders active.
			var releases []func()
			for k := range round%3 + 1 {
				releases = append(releases, g.Enter(earlier))
				if k == 0 {
					synctest.Wait()
					free = held(earlier)
				}
				time.Sleep(3 * time.Millisecond)
			}
			// Long enough for every sender to finish its work and reach the gate.
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if got := held(earlier); got != free {
				t.Fatalf("round %d: %d passes after class %d while %d of it waiting", round, got-free, earlier, g.Waiting(earlier))
			}

			// Release all but the last: still closed.
			for _, release := range releases[:len(releases)-1] {
				release()
				release() // twice is safe
				synctest.Wait()
				if got := held(earlier); got != free {
					t.Fatalf("round %d: %d passes after class %d while %d of it waiting", round, got-free, earlier, g.Waiting(earlier))
				}
			}
			releases[len(releases)-1]()
			synctest.Wait() // no fake time passes: each held sender passed exactly once
			if got := held(earlier); got != free+heldSenders {
				t.Fatalf("round %d: %d passes after the last of class %d left, want %d (every held sender once)", round, got-free, earlier, heldSenders)
			}
		}
		cancel()
		wg.Wait()
	})
}
