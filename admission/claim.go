package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/ledger"
)

// Default lifetimes of Claims.
const (
	DefaultClaimTTL  = 15 * time.Second
	DefaultRecordTTL = 24 * time.Hour
)

// Claims keeps the send-once records of message ids in Redis, under the
// account's hash tag so they live in the same cluster slot as the limiter.
// It is safe for concurrent use.
//
// The guarantee is Redis's: with asynchronous replication a failover can
// lose a record written just before it (docs/decisions.md, "Send once"), and the provider's
// Idempotency-Key is what closes that window.
type Claims struct {
	rdb       redis.Scripter
	key       keys.Account
	claimTTL  time.Duration
	recordTTL time.Duration
	timeout   time.Duration
	circuit   *Circuit // nil: every call asks Redis

	mu sync.Mutex
	// unreleased are claims whose Release did not reach Redis (down, or
	// known down); they are given back once it answers a Claim again, not
	// left to hold their ids' redeliveries until they expire. Guarded by mu.
	unreleased []claimRef
}

type claimRef struct{ id, token string }

// NewClaims returns the claims of account in rdb. A zero claimTTL or
// recordTTL means its default; timeout bounds each call (zero means
// DefaultRedisTimeout). circuit, shared with the process's Limiter
// (WithCircuit), keeps calls off a Redis known to be down: they fail at
// once with ErrRedisDown. If nil, every call asks Redis.
func NewClaims(rdb redis.Scripter, account string, claimTTL, recordTTL, timeout time.Duration, circuit *Circuit) *Claims {
	cfg := Config{Account: account}.withDefaults()
	if claimTTL <= 0 {
		claimTTL = DefaultClaimTTL
	}
	if recordTTL <= 0 {
		recordTTL = DefaultRecordTTL
	}
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	return &Claims{rdb: rdb, key: keys.For(cfg.Account), claimTTL: claimTTL, recordTTL: recordTTL, timeout: timeout, circuit: circuit}
}

// Key returns the Redis key of id's record.
func (c *Claims) Key(id string) string { return c.key.Record(id) }

// Claim takes the send claim of id for the attempt named token, for ttl
// (zero means the Claims' default). The claim must outlive the attempt's
// wait for a slot and its send.
func (c *Claims) Claim(ctx context.Context, id, token string, ttl time.Duration) (ledger.Record, error) {
	if ttl <= 0 {
		ttl = c.claimTTL
	}
	var v string
	err := c.circuit.do(ctx, c.timeout, func(ctx context.Context) (err error) {
		call := claimCall{Record: c.Key(id), Token: token, Millis: ttl.Milliseconds()}
		v, err = claimScript.Run(ctx, c.rdb, call.keys(), call.argv()...).Text()
		if err != nil {
			return fmt.Errorf("claim eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return ledger.Record{}, err
	}
	c.releaseLeftovers(ctx)
	if v == "claimed" {
		return ledger.Record{State: ledger.Claimed}, nil
	}
	return ledger.ParseRecord(v)
}

// Forget clears id's record when it says the provider refused the id
// (RefusedRecord's, RecordRejected), so that a replay of its dead letter
// is sent: it reports what the record said (State Unrecorded when none,
// Held for a live claim) and whether it was cleared. A record of a send is
// never cleared. A record this package does not know is an
// *UnknownRecordError.
func (c *Claims) Forget(ctx context.Context, id string) (was ledger.Record, cleared bool, err error) {
	return c.forget(ctx, id, true)
}

// Recorded reports what id's record says, as Forget does, and changes
// nothing: a replay's dry run.
func (c *Claims) Recorded(ctx context.Context, id string) (ledger.Record, error) {
	was, _, err := c.forget(ctx, id, false)
	return was, err
}

func (c *Claims) forget(ctx context.Context, id string, clear bool) (ledger.Record, bool, error) {
	var v []any
	err := c.circuit.do(ctx, c.timeout, func(ctx context.Context) (err error) {
		call := forgetCall{Record: c.Key(id), Clear: clear}
		v, err = forgetScript.Run(ctx, c.rdb, call.keys(), call.argv()...).Slice()
		if err != nil {
			return fmt.Errorf("forget eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return ledger.Record{}, false, err
	}
	var (
		state string
		n     int64
		ok    = len(v) == 2
	)
	if ok {
		state, ok = v[0].(string)
	}
	if ok {
		n, ok = v[1].(int64)
	}
	if !ok {
		return ledger.Record{}, false, fmt.Errorf("%w: forget.lua answered %v", ErrBadReply, v)
	}
	if state == "" {
		return ledger.Record{State: ledger.Unrecorded}, false, nil
	}
	rec, err := ledger.ParseRecord(state)
	return rec, n == 1, err
}

// Finish writes id's final record (RecordSent, SentRecord's or
// RecordRejected), which lives recordTTL. A send's record overwrites any
// claim: the outcome is a fact. RecordRejected is written only over the
// record Refuse wrote: a replay of the dead letter may have cleared it
// and sent the id meanwhile, and that send's record stands.
func (c *Claims) Finish(ctx context.Context, id, record string) error {
	if record != ledger.RecordSent && record != ledger.RecordRejected && !ledger.IsSent(record) {
		return errors.New("admission: Finish wants RecordSent, a SentRecord or RecordRejected")
	}
	return c.finish(ctx, id, record)
}

func (c *Claims) finish(ctx context.Context, id, record string) error {
	return c.circuit.do(ctx, c.timeout, func(ctx context.Context) error {
		call := finishCall{Record: c.Key(id), Leases: c.key.Leases(), Value: record, Millis: c.recordTTL.Milliseconds()}
		if err := finishScript.Run(ctx, c.rdb, call.keys(), call.argv()...).Err(); err != nil {
			return fmt.Errorf("finish %.16s: %w", record, err)
		}
		return nil
	})
}

// Refuse records that the provider refused id for good, with reason, before
// its dead letter is published: a redelivery then finds Refused and is
// dead-lettered without a second send. Finish(RecordRejected) follows once
// the dead letter is published. The record lives recordTTL.
func (c *Claims) Refuse(ctx context.Context, id, reason string) error {
	return c.finish(ctx, id, ledger.RefusedRecord(reason))
}

// Release gives token's claim on id back so that a retry need not wait for
// it to expire. Releasing a claim that is no longer the caller's is a no-op.
// When Redis cannot be reached the claim is kept and given back once Redis
// answers a Claim again.
func (c *Claims) Release(ctx context.Context, id, token string) error {
	err := c.release(ctx, []claimRef{{id, token}})
	if err != nil {
		c.keep(claimRef{id, token})
	}
	return err
}

// keep holds refs for a later release.
func (c *Claims) keep(refs ...claimRef) {
	c.mu.Lock()
	c.unreleased = keepLeftovers(c.unreleased, refs...)
	c.mu.Unlock()
}

// leftovers reports whether claims wait to be given back.
func (c *Claims) leftovers() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.unreleased) > 0
}

// releaseLeftovers gives back, in one call, claims whose Release failed.
func (c *Claims) releaseLeftovers(ctx context.Context) {
	c.mu.Lock()
	refs := c.unreleased
	c.unreleased = nil
	c.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	if err := c.release(context.WithoutCancel(ctx), refs); err != nil {
		c.keep(refs...)
	}
}

func (c *Claims) release(ctx context.Context, refs []claimRef) error {
	records, tokens := make([]string, len(refs)), make([]any, len(refs))
	for i, r := range refs {
		records[i], tokens[i] = c.Key(r.id), r.token
	}
	return c.circuit.do(ctx, c.timeout, func(ctx context.Context) error {
		if err := releaseScript.Run(ctx, c.rdb, records, tokens...).Err(); err != nil {
			return fmt.Errorf("release eval: %w", err)
		}
		return nil
	})
}
