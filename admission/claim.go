package admission

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed claim.lua
	claimLua    string
	claimScript = redis.NewScript(claimLua)

	//go:embed finish.lua
	finishLua    string
	finishScript = redis.NewScript(finishLua)

	//go:embed attempt.lua
	attemptLua    string
	attemptScript = redis.NewScript(attemptLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)

// ClaimState is the state of a message id's send record.
type ClaimState int

const (
	// Claimed means the caller holds the claim and may send.
	Claimed ClaimState = iota
	// Held means another attempt holds a live claim: it may be sending now.
	Held
	// Finished means the id already has a final record (sent, or rejected
	// for good): it must not be sent again.
	Finished
)

func (s ClaimState) String() string {
	return [...]string{"claimed", "held", "finished"}[s]
}

// Final records of an id.
const (
	RecordSent     = "sent"
	RecordRejected = "rejected"
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
// lose a record written just before it (seed 003), and the provider's
// Idempotency-Key is what closes that window.
type Claims struct {
	rdb       redis.Scripter
	tag       string // {sms:<account>}:
	prefix    string // tag + "id:"
	claimTTL  time.Duration
	recordTTL time.Duration
	timeout   time.Duration
}

// NewClaims returns the claims of account in rdb. A zero claimTTL or
// recordTTL means its default; timeout bounds each call (zero means
// DefaultRedisTimeout).
func NewClaims(rdb redis.Scripter, account string, claimTTL, recordTTL, timeout time.Duration) *Claims {
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
	tag := "{sms:" + cfg.Account + "}:"
	return &Claims{rdb: rdb, tag: tag, prefix: tag + "id:", claimTTL: claimTTL, recordTTL: recordTTL, timeout: timeout}
}

// Key returns the Redis key of id's record.
func (c *Claims) Key(id string) string { return c.prefix + id }

// Claim takes the send claim of id for the attempt named token, for ttl
// (zero means the Claims' default). The claim must outlive the attempt's
// wait for a slot and its send.
func (c *Claims) Claim(ctx context.Context, id, token string, ttl time.Duration) (ClaimState, error) {
	if ttl <= 0 {
		ttl = c.claimTTL
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := claimScript.Run(ctx, c.rdb, []string{c.Key(id)}, token, ttl.Milliseconds()).Text()
	if err != nil {
		return 0, fmt.Errorf("claim eval: %w", err)
	}
	switch v {
	case "claimed":
		return Claimed, nil
	case "held":
		return Held, nil
	case RecordSent, RecordRejected:
		return Finished, nil
	}
	return 0, fmt.Errorf("%w: claim returned %q", ErrBadReply, v)
}

// Finish writes id's final record (RecordSent or RecordRejected), which
// lives recordTTL. It overwrites any claim: the outcome is a fact.
func (c *Claims) Finish(ctx context.Context, id, record string) error {
	if record != RecordSent && record != RecordRejected {
		return errors.New("admission: Finish wants RecordSent or RecordRejected")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := finishScript.Run(ctx, c.rdb, []string{c.Key(id)}, record, c.recordTTL.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("finish %s: %w", record, err)
	}
	return nil
}

// CountAttempt counts one more provider attempt for id and returns the
// count, this attempt included. The count lives as long as the id's record.
func (c *Claims) CountAttempt(ctx context.Context, id string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	n, err := attemptScript.Run(ctx, c.rdb, []string{c.tag + "attempts:" + id}, c.recordTTL.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("attempt eval: %w", err)
	}
	return n, nil
}

// Release gives token's claim on id back so that a retry need not wait for
// it to expire. Releasing a claim that is no longer the caller's is a no-op.
func (c *Claims) Release(ctx context.Context, id, token string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := releaseScript.Run(ctx, c.rdb, []string{c.Key(id)}, token).Err(); err != nil {
		return fmt.Errorf("release eval: %w", err)
	}
	return nil
}
