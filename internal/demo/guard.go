package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/guard"
	"smsdispatcher/internal/keys"
)

// --guard: the first class (otp) gets the pumping guard of docs/guard.md's
// example, in its place in the classes as ACCOUNTS_FILE's keys would put
// it, so that every instance builds it as serve does (server's guard, from
// the classes' policy). The demo plays the application too: it publishes
// the verification of about 80 % of the OTPs sent (every unverifiedEvery-th
// code goes unused), verifyAfter after their send, as a user typing the
// code; the conversion rule sees a healthy range and the range brake the
// demo's spread of numbers, so nothing legitimate is blocked.
const (
	unverifiedEvery = 5
	verifyAfter     = 500 * time.Millisecond
)

// demoGuard is docs/guard.md's example: the countries of the demo's
// numbers (+81) among others, a range's brake and its share of verified
// codes, min_conversion's grace left to its default.
func demoGuard() *policy.Guard {
	return &policy.Guard{
		Countries:     []string{"+1", "+44", "+81"},
		MaxPerPrefix:  policy.PrefixRate{Digits: 6, Count: 300, Per: 10 * time.Minute, BlockFor: time.Hour},
		MinConversion: policy.Conversion{Ratio: 0.2, MinSends: 50, Per: 30 * time.Minute, Digits: 5, Grace: config.DefaultConversionGrace, BlockFor: time.Hour},
	}
}

// guarded returns cfg with its first class guarded by demoGuard.
func guarded(cfg config.Settings) config.Settings {
	cfg.Lanes = slices.Clone(cfg.ClassList())
	cfg.Lanes[0].Guard = demoGuard()
	return cfg
}

// verifier publishes the verifications of --guard ({"id"} to
// VERIFICATIONS_TOPIC). Safe for concurrent use.
type verifier struct {
	ctx       context.Context
	pub       *pubsub.Publisher
	pending   sync.WaitGroup
	published atomic.Int64
	stopOnce  sync.Once

	mu     sync.Mutex
	closed bool // guarded by mu: verify publishes nothing more
}

func newVerifier(ctx context.Context, ps *pubsub.Client, topic string) *verifier {
	return &verifier{ctx: ctx, pub: ps.Publisher(topic)}
}

// verify publishes the verification of the OTP id verifyAfter from now.
func (v *verifier) verify(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.pending.Add(1)
	time.AfterFunc(verifyAfter, func() {
		defer v.pending.Done()
		data, _ := json.Marshal(guard.Verification{ID: id})
		if _, err := v.pub.Publish(v.ctx, &pubsub.Message{Data: data}).Get(v.ctx); err == nil {
			v.published.Add(1)
		}
	})
}

// stop publishes no more, waits for the verifications due and returns
// how many were published. It may be called again.
func (v *verifier) stop() int {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.pending.Wait()
	v.stopOnce.Do(v.pub.Stop)
	return int(v.published.Load())
}

// GuardFigures are what the guard of --guard did in a run.
type GuardFigures struct {
	// Blocked are the messages it blocked, by reason.
	Blocked map[string]int
	// OTPs are the distinct OTPs sent, Sends their sends (a resend
	// counts again); Counted those OTPs the guard counted in its ranges
	// (their otp:<id> key in Redis); CountErr says why they could not be
	// read.
	OTPs, Sends, Counted int
	CountErr             string
	// Verified are the verifications the demo published.
	Verified int
	// SentCalls and VerifyCalls are the guard's script calls (guard-sent,
	// guard-verify), as the instances' clients counted them.
	SentCalls, VerifyCalls int64
}

// countedByGuard returns how many of ids (the first class's sent OTPs) the
// guard of class counted: those whose otp:<id> key it wrote.
func countedByGuard(ctx context.Context, rdb redis.UniversalClient, class string, ids []string) (int, error) {
	k := keys.GuardOf(class)
	counted := 0
	for chunk := range slices.Chunk(ids, 500) {
		names := make([]string, len(chunk))
		for i, id := range chunk {
			names[i] = k.OTP(id)
		}
		// One EXISTS a chunk: every key of a class's guard is in its slot,
		// so one command may hold many under Redis Cluster too.
		n, err := rdb.Exists(ctx, names...).Result()
		if err != nil {
			return counted, err
		}
		counted += int(n)
	}
	return counted, nil
}

// printGuard writes the report's lines of --guard's guard; none without
// it. sent is every class's sends.
func printGuard(w io.Writer, g *GuardFigures, sent int) {
	if g == nil {
		return
	}
	per := func(n int64) float64 { return float64(n) / float64(max(sent, 1)) }
	counted := fmt.Sprint(g.Counted)
	if g.CountErr != "" {
		counted = "n/a (" + g.CountErr + ")"
	}
	fmt.Fprintf(w, "  guard (--guard)                  blocked %d (%s); OTPs counted in its ranges %s of %d sent; codes verified %d\n",
		total(g.Blocked), cmp.Or(countsText(g.Blocked), "none"), counted, g.OTPs, g.Verified)
	fmt.Fprintf(w, "  guard's script calls             %.3f guard-sent, %.3f guard-verify per sent message (off the messages' path)\n",
		per(g.SentCalls), per(g.VerifyCalls))
}

// guardFigures are the run's figures of --guard's guard that the
// instances' events and clients counted, once every instance has
// stopped.
func (r *run) guardFigures() *GuardFigures {
	s := r.stats
	s.mu.Lock()
	g := &GuardFigures{Blocked: maps.Clone(s.blocked), OTPs: len(s.guardedIDs), Sends: s.guardedSent}
	s.mu.Unlock()
	for _, c := range r.counters {
		g.SentCalls += c.guardSent.Load()
		g.VerifyCalls += c.guardVerify.Load()
	}
	return g
}

// countGuarded reads how many of the run's sent OTPs the guard counted
// into g, after Redis's figures were read: its reads are no part of the
// run's cost.
func (r *run) countGuarded(ctx context.Context, rdb redis.UniversalClient, g *GuardFigures) {
	r.stats.mu.Lock()
	ids := slices.Collect(maps.Keys(r.stats.guardedIDs))
	r.stats.mu.Unlock()
	n, err := countedByGuard(ctx, rdb, r.cfg.ClassList()[0].Name.String(), ids)
	g.Counted = n
	if err != nil {
		g.CountErr = err.Error()
	}
}
