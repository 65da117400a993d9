package console

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/status"
)

// beating is a process beating on the test Redis with the denials its
// test sets, as a serving process beats with those it counts.
type beating struct {
	mu     sync.Mutex
	denied status.Denied
	stop   context.CancelFunc
	done   chan struct{}
}

func (b *beating) set(account, class string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.denied[account] == nil {
		b.denied[account] = map[string]int64{}
	}
	b.denied[account][class] = n
}

func (b *beating) counts() status.Denied {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := status.Denied{}
	for account, byClass := range b.denied {
		out[account] = map[string]int64{}
		for class, n := range byClass {
			out[account][class] = n
		}
	}
	return out
}

// beat starts process id beating on lims until its stop.
func beat(t *testing.T, id string, lims []*admission.Limiter) *beating {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	b := &beating{denied: status.Denied{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		status.Heartbeats(ctx, id, "v1", status.Redis{Client: redistest.Client(t)}, lims, b.counts)
	}()
	t.Cleanup(func() { stop(); <-b.done })
	return b
}

// TestTheChartSumsTheProcessesDenials: the deliveries two processes deny
// on the account after the console first looked show on the chart summed,
// each under its class; what they denied before is not counted; when a
// process ends and its registry entry goes, what it denied stays on the
// chart while the other's new denials add to it.
func TestTheChartSumsTheProcessesDenials(t *testing.T) {
	rdb := redistest.Client(t)
	ctx := context.Background()
	id := redistest.UniqueAccount(t)
	var account string
	var p1, p2 *beating
	// Denied before the console starts (the hour's worth of a
	// long-running pool): not on its chart.
	before := func(cfg config.Settings) {
		routing, err := cfg.Routing()
		if err != nil {
			t.Fatal(err)
		}
		setups, err := operator.Setups(rdb, cfg, routing.Accounts, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		account = setups[0].Name
		lims := []*admission.Limiter{setups[0].Limiter}
		p1, p2 = beat(t, id+"-1", lims), beat(t, id+"-2", lims)
		p1.set(account, "marketing", 18000)
		p2.set(account, "otp", 1)
		waitFor(t, "both processes beating with their denials", func() bool {
			states, err := rdb.HMGet(ctx, keys.ProcessStates(), id+"-1", id+"-2").Result()
			return err == nil && strings.Contains(stateOf(states[0]), "/marketing=18000") && strings.Contains(stateOf(states[1]), "/otp=1")
		})
	}
	h := newHarnessBefore(t, basicAuth(t, map[string]string{"vic": "viewer"}), Lists{}, map[string]string{"SMS_ACCOUNT": redistest.UniqueAccount(t)}, before)
	// denied reads the chart's denials of the last 60 s, by class.
	denied := func() (marketing, otp int) {
		t.Helper()
		code, body := h.request("vic", "GET", "/chart", nil)
		if code != 200 {
			t.Fatalf("/chart: %d\n%s", code, body)
		}
		marketing, err1 := strconv.Atoi(between(body, `class="denied-marketing">`, "<"))
		otp, err2 := strconv.Atoi(between(body, `class="denied-otp">`, "<"))
		if err1 != nil || err2 != nil || !strings.Contains(body, `class="denied" data-class="marketing"`) {
			t.Fatalf("the chart has no denied series:\n%s", body)
		}
		return marketing, otp
	}
	if m, o := denied(); m != 0 || o != 0 {
		t.Fatalf("the first reading shows %d marketing and %d otp denied, want none: they were denied before", m, o)
	}

	p1.set(account, "marketing", 18003) // 3 more
	p2.set(account, "marketing", 4)
	p2.set(account, "otp", 3) // 2 more
	waitFor(t, "7 marketing and 2 otp denied on the chart", func() bool {
		m, o := denied()
		return m == 7 && o == 2
	})
	time.Sleep(1500 * time.Millisecond) // a beat more, counts unchanged
	if m, o := denied(); m != 7 || o != 2 {
		t.Fatalf("a beat later the chart shows %d marketing and %d otp denied, want still 7 and 2", m, o)
	}

	// p1 ends, and its entry goes from the registry (as heartbeatKeep
	// after its last beat); p2 denies one more.
	p1.stop()
	<-p1.done
	if err := rdb.ZRem(ctx, keys.Processes(), id+"-1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, keys.ProcessStates(), id+"-1").Err(); err != nil {
		t.Fatal(err)
	}
	if m, o := denied(); m != 7 || o != 2 {
		t.Fatalf("with p1 gone the chart shows %d marketing and %d otp denied, want still 7 and 2", m, o)
	}
	p2.set(account, "marketing", 5)
	waitFor(t, "p2's denial added to what p1 denied", func() bool {
		m, o := denied()
		return m == 8 && o == 2
	})
}

// stateOf is a registry state as HMGet reads it, "" for none.
func stateOf(v any) string {
	s, _ := v.(string)
	return s
}

// waitFor polls cond every 100 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
