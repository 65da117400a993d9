package dispatch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// Fakes of the pipeline's dependencies, for the branches of one delivery.
type (
	fakeLimiter struct {
		dec       admission.Decision
		onAcquire func() // if set, runs in Acquire: the time the wait takes
		mu        sync.Mutex
		throttled []time.Duration // guarded by mu
		paused    []string        // guarded by mu: the whys of ReportAccountFailure
		costs     []int           // guarded by mu: the cost of each Admit
		// The id's record as Admit finds it, and the Redis error it meets
		// (ErrRedisDown: the fallback decides, and claims nothing).
		rec      ledger.Record
		claimErr error
		claims   *fakeClaims    // if set, the claims taken and settled are noted in its log
		stories  []ledger.Story // guarded by mu: each story a Settle kept
	}
	fakeClaims struct {
		mu  sync.Mutex
		log []string // guarded by mu
	}
	fakeSender struct {
		err     error
		receipt provider.Receipt
		onSend  func() // if set, runs in Send: the time the send takes
		mu      sync.Mutex
		sends   int // guarded by mu
	}
	fakeDLQ struct {
		err     error
		mu      sync.Mutex
		reasons []string // guarded by mu
	}
)

var (
	_ Limiter      = (*fakeLimiter)(nil)
	_ Claimer      = (*fakeClaims)(nil)
	_ Sender       = (*fakeSender)(nil)
	_ DeadLetterer = (*fakeDLQ)(nil)
)

func (l *fakeLimiter) Admit(_ context.Context, class admission.Class, cost int, _ time.Duration, claim admission.Claim) (admission.Decision, error) {
	if l.onAcquire != nil {
		l.onAcquire()
	}
	l.mu.Lock()
	l.costs = append(l.costs, cost)
	l.mu.Unlock()
	switch {
	case claim.Token == "":
		return l.dec, nil
	case l.claimErr != nil && class == admission.Marketing:
		return admission.Decision{Source: admission.SourceFallback, Reason: admission.ReasonNoRecord, RetryAfter: time.Second}, nil
	case l.claimErr != nil:
		d := l.dec
		d.Source = admission.SourceFallback
		return d, nil
	case l.rec.State != ledger.Claimed:
		return admission.Decision{Source: admission.SourceRedis, Reason: admission.ReasonRecord, Record: l.rec}, nil
	}
	d := l.dec
	if d.Allowed {
		d.Claimed = true
		l.note("claim")
	}
	return d, nil
}

func (l *fakeLimiter) Health() admission.Health { return admission.Healthy }

func (l *fakeLimiter) Settle(_ context.Context, d admission.Decision, record string, _ admission.SendResult, s ledger.Story) error {
	if s.Class != "" { // a story kept: every story names its class
		l.mu.Lock()
		l.stories = append(l.stories, s)
		l.mu.Unlock()
	}
	switch {
	case !d.Claimed:
	case record == "":
		l.note("release")
	case strings.HasPrefix(record, "refused:"):
		l.note("refuse " + strings.TrimPrefix(record, "refused:"))
	default:
		l.note("finish " + record)
	}
	return nil
}

func (l *fakeLimiter) note(s string) {
	if l.claims != nil {
		l.claims.note(s)
	}
}

// fixedClock is a Clock a test moves by hand.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
func (l *fakeLimiter) ReportThrottled(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	l.throttled = append(l.throttled, d)
	l.mu.Unlock()
	return nil
}
func (l *fakeLimiter) ReportAccountFailure(_ context.Context, _ time.Duration, why string) error {
	l.mu.Lock()
	l.paused = append(l.paused, why)
	l.mu.Unlock()
	return nil
}
func (l *fakeLimiter) ResumeAccount(context.Context) error { return nil }
func (l *fakeLimiter) CheckPause(context.Context) (string, time.Duration, bool) {
	return l.AccountPause()
}
func (l *fakeLimiter) AccountPause() (string, time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.paused) == 0 {
		return "", 0, false
	}
	return l.paused[len(l.paused)-1], time.Minute, true
}

func (c *fakeClaims) note(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}
func (c *fakeClaims) Finish(_ context.Context, _, record string) error {
	c.note("finish " + record)
	return nil
}
func (c *fakeClaims) Claim(context.Context, string, string, time.Duration) (ledger.Record, error) {
	c.note("claim")
	return ledger.Record{State: ledger.Claimed}, nil
}
func (c *fakeClaims) Refuse(_ context.Context, _, reason string) error {
	c.note("refuse " + reason)
	return nil
}
func (c *fakeClaims) Release(context.Context, string, string) error {
	c.note("release")
	return nil
}

func (s *fakeSender) Send(context.Context, provider.Message) (provider.Receipt, error) {
	s.mu.Lock()
	s.sends++
	s.mu.Unlock()
	if s.onSend != nil {
		s.onSend()
	}
	if s.err != nil {
		return provider.Receipt{}, s.err
	}
	return s.receipt, nil
}

func (q *fakeDLQ) DeadLetter(_ context.Context, _ *pubsub.Message, _ admission.Class, reason string) error {
	q.mu.Lock()
	q.reasons = append(q.reasons, reason)
	q.mu.Unlock()
	return q.err
}

type eventLog struct {
	mu  sync.Mutex
	evs []Event // guarded by mu
}

func (o *eventLog) Observe(ev Event) {
	o.mu.Lock()
	o.evs = append(o.evs, ev)
	o.mu.Unlock()
}

// unitDispatcher returns a Dispatcher on fakes, ready for handle (its
// subscriptions are never received from).
func unitDispatcher(t *testing.T, cfg Config, deps Deps) *Dispatcher {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	c, err := pubsub.NewClient(context.Background(), project, option.WithEndpoint(srv.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	deps.OTP, deps.Marketing = c.Subscriber("otp"), c.Subscriber("marketing")
	d, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	d.hard = context.Background() // Run's, which these tests do not call
	return d
}

func TestPipelineBranches(t *testing.T) {
	allowed := admission.Decision{Allowed: true, Source: admission.SourceRedis}
	denied := admission.Decision{RetryAfter: time.Second, Source: admission.SourceRedis, Reason: admission.ReasonGlobal}
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		class     admission.Class // "": otp
		attempt   int             // Pub/Sub delivery attempt; 0: no dead-letter policy
		deadline  time.Duration   // from t0; 0: none
		waits     time.Duration   // the clock moves this much while Acquire waits
		dec       admission.Decision
		rec       ledger.Record // what Admit finds of the id's record
		claimErr  error
		sendErr   error
		dlqErr    error
		want      nack.Outcome
		action    nack.Action
		sends     int
		claimLog  string // the claims taken and settled, joined by "; "
		reason    string // prefix of the dead letter's reject_reason
		throttled []time.Duration
		receipt   provider.Receipt
		unit      RateUnit
		body      string   // "": a one-segment OTP
		costs     []int    // the cost of each Admit; nil: not checked
		paused    []string // the whys of ReportAccountFailure
	}{
		{name: "sent", dec: allowed, want: nack.Sent, action: nack.Ack, sends: 1, claimLog: "claim; finish sent"},
		{name: "denied, retried: no claim written", dec: denied, want: nack.Denied, action: nack.Nack},
		{name: "denied on the last delivery: dead-lettered with a reason", attempt: 100, dec: denied,
			want: nack.Denied, action: nack.DeadLetter, reason: "max_attempts: 100 deliveries, last denied"},
		{name: "a 429 shares its Retry-After", dec: allowed, sendErr: &provider.Error{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second},
			want: nack.Throttled, action: nack.Nack, sends: 1, claimLog: "claim; release", throttled: []time.Duration{3 * time.Second}},
		{name: "refused: recorded, then dead-lettered and recorded final", dec: allowed, sendErr: &provider.Error{Status: 422, Message: "number blocked"},
			want: nack.Rejected, action: nack.DeadLetter, sends: 1, claimLog: "claim; refuse provider: status 422: number blocked; finish rejected", reason: "provider: status 422: number blocked"},
		{name: "refused, dead letter fails: nacked, the refusal kept", dec: allowed, sendErr: &provider.Error{Status: 422, Message: "number blocked"}, dlqErr: errors.New("topic not found"),
			want: nack.Rejected, action: nack.Nack, sends: 1, claimLog: "claim; refuse provider: status 422: number blocked", reason: "provider: status 422: number blocked"},
		{name: "refused earlier: dead-lettered with the recorded reason, not sent", dec: allowed,
			rec:  ledger.Record{State: ledger.Refused, RejectReason: "provider: status 422: number blocked"},
			want: nack.Rejected, action: nack.DeadLetter, claimLog: "finish rejected", reason: "provider: status 422: number blocked"},
		{name: "already sent", dec: allowed, rec: ledger.Record{State: ledger.Finished},
			want: nack.Duplicate, action: nack.Ack},
		{name: "held elsewhere", dec: allowed, rec: ledger.Record{State: ledger.Held},
			want: nack.InFlightElsewhere, action: nack.Nack},
		{name: "OTP without the record: sent anyway", dec: allowed, claimErr: admission.ErrRedisDown,
			want: nack.Sent, action: nack.Ack, sends: 1},
		{name: "marketing without the record: waits for Redis", class: admission.Marketing, dec: allowed, claimErr: admission.ErrRedisDown,
			want: nack.Denied, action: nack.Nack},
		{name: "past its deadline on arrival: acked unsent, not even claimed", deadline: -time.Second, dec: allowed,
			want: nack.Expired, action: nack.Ack},
		{name: "deadline passes while denied: expired, not retried", deadline: 500 * time.Millisecond, waits: time.Second, dec: denied,
			want: nack.Expired, action: nack.Ack},
		{name: "deadline passes while waiting for the slot: the slot goes unused", deadline: 500 * time.Millisecond, waits: time.Second, dec: allowed,
			want: nack.Expired, action: nack.Ack, claimLog: "claim; release"},
		{name: "deadline ahead: sent", deadline: time.Minute, waits: time.Second, dec: allowed,
			want: nack.Sent, action: nack.Ack, sends: 1, claimLog: "claim; finish sent"},
		{name: "the provider's id is kept in the record", dec: allowed, receipt: provider.Receipt{ID: "SM0123"},
			want: nack.Sent, action: nack.Ack, sends: 1, claimLog: "claim; finish sent:SM0123"},
		{name: "a throttle in a 200 body shares its penalty like a 429", dec: allowed,
			sendErr: &provider.Error{Provider: "vonage", Status: 200, Code: "1", Kind: provider.KindThrottled, RetryAfter: time.Second},
			want:    nack.Throttled, action: nack.Nack, sends: 1, claimLog: "claim; release", throttled: []time.Duration{time.Second}},
		{name: "wrong credentials: the account pauses, the message waits, nothing dead-lettered", dec: allowed,
			sendErr: &provider.Error{Status: http.StatusUnauthorized, Message: "bad token"},
			want:    nack.AccountFailure, action: nack.Nack, sends: 1, claimLog: "claim; release", paused: []string{"status 401"}},
		{name: "an account-level code in a 200 body pauses the account", dec: allowed,
			sendErr: &provider.Error{Provider: "vonage", Status: 200, Code: "9", Kind: provider.KindAccount},
			want:    nack.AccountFailure, action: nack.Nack, sends: 1, claimLog: "claim; release", paused: []string{"vonage status 200 code 9"}},
		{name: "rates in messages: a long body costs 1", dec: allowed, body: strings.Repeat("a", 400),
			want: nack.Sent, action: nack.Ack, sends: 1, claimLog: "claim; finish sent", costs: []int{1}},
		{name: "rates in segments: a 400-character body costs 3", unit: PerSegment, dec: allowed, body: strings.Repeat("a", 400),
			want: nack.Sent, action: nack.Ack, sends: 1, claimLog: "claim; finish sent", costs: []int{3}},
		{name: "rates in segments: a body over MAX_SEGMENTS is invalid", unit: PerSegment, dec: allowed, body: strings.Repeat("あ", 700),
			want: nack.Invalid, action: nack.DeadLetter, reason: "invalid: too_many_segments: body is 11 segments, more than MAX_SEGMENTS (6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.class = cmp.Or(tt.class, admission.OTP)
			clock := &fixedClock{t: t0}
			claims := &fakeClaims{}
			lim := &fakeLimiter{dec: tt.dec, onAcquire: func() { clock.Add(tt.waits) }, rec: tt.rec, claimErr: tt.claimErr, claims: claims}
			sender, dlq, obs := &fakeSender{err: tt.sendErr, receipt: tt.receipt}, &fakeDLQ{err: tt.dlqErr}, &eventLog{}
			d := unitDispatcher(t, Config{MaxDeliveryAttempts: 100, RateUnit: tt.unit},
				Deps{Limiter: lim, Claims: claims, Sender: sender, DeadLetter: dlq, Observer: obs, Clock: clock})
			body := tt.body
			if body == "" {
				body = "code 482913"
			}
			data := `{"id":"login-1","to":"+819012345678","body":"` + body + `"`
			if tt.deadline != 0 {
				data += `,"deadline":"` + t0.Add(tt.deadline).Format(time.RFC3339Nano) + `"`
			}
			m := &pubsub.Message{ID: "m1", Data: []byte(data + "}")}
			if tt.attempt > 0 {
				m.DeliveryAttempt = &tt.attempt
			}
			d.handle(context.Background(), tt.class, "sub", m)

			ev := obs.evs[0]
			if ev.Outcome != tt.want || ev.Action != tt.action {
				t.Errorf("event %v/%v (%v), want %v/%v", ev.Outcome, ev.Action, ev.Err, tt.want, tt.action)
			}
			if sender.sends != tt.sends {
				t.Errorf("%d sends, want %d", sender.sends, tt.sends)
			}
			if got := strings.Join(claims.log, "; "); got != tt.claimLog {
				t.Errorf("claims: %q, want %q", got, tt.claimLog)
			}
			switch {
			case tt.reason == "" && len(dlq.reasons) > 0:
				t.Errorf("dead letters %q, want none", dlq.reasons)
			case tt.reason != "" && (len(dlq.reasons) != 1 || !strings.HasPrefix(dlq.reasons[0], tt.reason)):
				t.Errorf("dead letters %q, want one with a reason starting %q", dlq.reasons, tt.reason)
			}
			if len(lim.throttled) != len(tt.throttled) || (len(tt.throttled) > 0 && lim.throttled[0] != tt.throttled[0]) {
				t.Errorf("penalties reported %v, want %v", lim.throttled, tt.throttled)
			}
			if !slices.Equal(lim.paused, tt.paused) {
				t.Errorf("account pauses reported %q, want %q", lim.paused, tt.paused)
			}
			if tt.costs != nil && !slices.Equal(lim.costs, tt.costs) {
				t.Errorf("Admit costs %v, want %v", lim.costs, tt.costs)
			}
			if ev.ProviderID != tt.receipt.ID {
				t.Errorf("event's provider id %q, want %q", ev.ProviderID, tt.receipt.ID)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	d := unitDispatcher(t, Config{}, Deps{Limiter: &fakeLimiter{}, Claims: &fakeClaims{}, Sender: &fakeSender{}, DeadLetter: &fakeDLQ{}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if err := d.Run(ctx); !errors.Is(err, ErrRunTwice) {
		t.Fatalf("second Run: %v, want ErrRunTwice", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccountFailuresLogOneErrorLineAMinute: every account-level refusal
// pauses the account, but the error log says so once a minute, not once
// per message; the line names the reason and never the credential.
func TestAccountFailuresLogOneErrorLineAMinute(t *testing.T) {
	var logs syncBuffer
	lim := &fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}}
	sender := &fakeSender{err: &provider.Error{Provider: "twilio", Status: 401, Code: "20003", Message: "Authenticate"}}
	d := unitDispatcher(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Deps{Limiter: lim, Claims: &fakeClaims{}, Sender: sender, DeadLetter: &fakeDLQ{}})
	for i := range 5 {
		data := `{"id":"login-` + strconv.Itoa(i) + `","to":"+819012345678","body":"code 482913"}`
		d.handle(context.Background(), admission.OTP, "sub", &pubsub.Message{ID: strconv.Itoa(i), Data: []byte(data)})
	}
	if len(lim.paused) != 5 {
		t.Fatalf("%d account pauses reported, want one per refusal (5)", len(lim.paused))
	}
	var errorLines []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			errorLines = append(errorLines, line)
		}
	}
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], `reason="twilio status 401 code 20003"`) {
		t.Fatalf("error log lines %q, want exactly one naming the reason", errorLines)
	}
}

// changingCreds is a credential that an operator fixes at the moment a
// send with the old one is refused: Reload sees the new file.
type changingCreds struct{ version atomic.Uint64 }

func (c *changingCreds) Reload() (bool, error) { c.version.Add(1); return true, nil }
func (c *changingCreds) Version() uint64       { return c.version.Load() }

// TestARefusalOfAReplacedCredentialPausesNothing: an account-level answer
// to a send made with a credential that has changed since says nothing of
// the new one: the account is not paused, the message waits for its
// redelivery, and the next send uses the new credential.
func TestARefusalOfAReplacedCredentialPausesNothing(t *testing.T) {
	lim := &fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}}
	sender := &fakeSender{err: &provider.Error{Status: 401, Message: "bad token"}}
	d := unitDispatcher(t, Config{}, Deps{Limiter: lim, Claims: &fakeClaims{}, Sender: sender, DeadLetter: &fakeDLQ{},
		Credentials: &changingCreds{}})
	d.handle(context.Background(), admission.OTP, "sub", &pubsub.Message{ID: "1", Data: []byte(`{"id":"login-1","to":"+819012345678","body":"code 482913"}`)})
	if len(lim.paused) != 0 {
		t.Fatalf("account pauses %q after a refusal of a replaced credential, want none", lim.paused)
	}
}

// TestASpentRetryBudgetPausesThePulls: transient failures in a row spend
// the retry budget, and the one that spends it ends the lane's Receive
// (the pulls pause and back off), not the next message's send.
func TestASpentRetryBudgetPausesThePulls(t *testing.T) {
	claims := &fakeClaims{}
	lim := &fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}, claims: claims}
	sender := &fakeSender{err: &provider.Error{Status: http.StatusServiceUnavailable}}
	d := unitDispatcher(t, Config{}, Deps{Limiter: lim, Claims: claims, Sender: sender, DeadLetter: &fakeDLQ{}, Observer: &eventLog{}})
	// The lane as Run leaves it while a Receive runs.
	receive, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := d.laneOf[admission.Marketing]
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	for i := 0; d.budget.Allow(); i++ {
		if receive.Err() != nil {
			t.Fatalf("the lane paused after %d failures, with the budget not yet spent", i)
		}
		n := strconv.Itoa(i)
		m := &pubsub.Message{ID: "m" + n, Data: []byte(`{"id":"sale-` + n + `","to":"+819012345678","body":"sale"}`)}
		d.handle(context.Background(), admission.Marketing, "sub", m)
	}
	if receive.Err() == nil {
		t.Fatal("the retry budget is spent and the lane still pulls")
	}
}
