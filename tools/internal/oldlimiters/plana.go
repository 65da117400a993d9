package oldlimiters

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// incrExpirer lists the Redis calls of AtomicIncr; *redis.Client has them.
type incrExpirer interface {
	Incr(ctx context.Context, key string) *redis.IntCmd
	Expire(ctx context.Context, key string, expiration time.Duration) *redis.BoolCmd
}

// AtomicIncr is the team's plan A of the incident ("make it one atomic INCR";
// docs/design.md, "The incident it replaces"):
// v2 with the GET and INCR folded into one INCR, admitting when the result
// is at most Limit. The count is now exact, 100.0 per key, but the window
// is still a fixed one-second bucket named by each process's own clock, and
// a Redis error still admits. The incident's analysis: no 429s from a
// provider counting fixed seconds, suspension within 22 to 60 seconds from
// a strict one.
//
// A denied INCR still counts, so a key ends far above Limit; only the first
// INCR of a key sets its EXPIRE, the usual idiom (one round trip per ask).
// It is safe for concurrent use.
type AtomicIncr struct {
	rdb    incrExpirer
	prefix string
	limit  int64
}

// NewAtomicIncr returns plan A counting in rdb under keys
// prefix+"<unix second>". limit zero or negative means ContractRPS.
func NewAtomicIncr(rdb incrExpirer, prefix string, limit int) *AtomicIncr {
	if limit <= 0 {
		limit = ContractRPS
	}
	return &AtomicIncr{rdb: rdb, prefix: prefix, limit: int64(limit)}
}

// Key returns the window key that AllowAt(now) counts in.
func (l *AtomicIncr) Key(now time.Time) string { return windowKey(l.prefix, now) }

// AllowAt reports whether one more message may go in the window of now,
// counting the ask either way. On a Redis error it returns true, failing
// open like v2, with the error for the caller to count.
func (l *AtomicIncr) AllowAt(ctx context.Context, now time.Time) (bool, error) {
	key := l.Key(now)
	n, err := l.rdb.Incr(ctx, key).Result()
	if err != nil {
		return true, fmt.Errorf("plan A incr: %w", err)
	}
	if n == 1 {
		if err := l.rdb.Expire(ctx, key, KeyTTL).Err(); err != nil {
			return true, fmt.Errorf("plan A expire: %w", err)
		}
	}
	return n <= l.limit, nil
}
