package oldlimiters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyTTL is v2's EXPIRE of a window key: two seconds.
const KeyTTL = 2 * time.Second

// getIncrExpirer lists the Redis calls of GetIncr; *redis.Client has them.
type getIncrExpirer interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	incrExpirer
}

// windowKey returns v2's key sms:{int(time.time())} under prefix: the
// Unix second of the caller's clock.
func windowKey(prefix string, now time.Time) string {
	return prefix + strconv.FormatInt(now.Unix(), 10)
}

// GetIncr is v2 of the incident (notify-worker):
//
//	key = f"sms:{int(time.time())}"   # the pod's clock, a fixed window
//	count = int(r.get(key) or 0)
//	if count >= 100: return False     # others slip in here
//	r.incr(key); r.expire(key, 2)
//	except redis.RedisError: return True
//
// Between the GET and the INCR other processes read the same count, so a
// window can admit more than Limit; each process names the window by its
// own clock, so skewed clocks share a second unevenly; and a Redis error
// admits. It is safe for concurrent use.
type GetIncr struct {
	rdb    getIncrExpirer
	prefix string
	limit  int64
}

// NewGetIncr returns v2 counting in rdb under keys prefix+"<unix second>".
// The old code's prefix was "sms:" and its limit ContractRPS; limit zero or
// negative means ContractRPS.
func NewGetIncr(rdb getIncrExpirer, prefix string, limit int) *GetIncr {
	if limit <= 0 {
		limit = ContractRPS
	}
	return &GetIncr{rdb: rdb, prefix: prefix, limit: int64(limit)}
}

// Key returns the window key that AllowAt(now) counts in.
func (l *GetIncr) Key(now time.Time) string { return windowKey(l.prefix, now) }

// AllowAt reports whether one more message may go in the window of now:
// GET, and if below the limit INCR and EXPIRE. On a Redis error it returns
// true, failing open as the old code did, with the error for the caller to
// count.
func (l *GetIncr) AllowAt(ctx context.Context, now time.Time) (bool, error) {
	key := l.Key(now)
	n, err := l.rdb.Get(ctx, key).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		n = 0
	case err != nil:
		return true, fmt.Errorf("v2 get: %w", err)
	}
	if n >= l.limit {
		return false, nil
	}
	if err := l.rdb.Incr(ctx, key).Err(); err != nil {
		return true, fmt.Errorf("v2 incr: %w", err)
	}
	if err := l.rdb.Expire(ctx, key, KeyTTL).Err(); err != nil {
		return true, fmt.Errorf("v2 expire: %w", err)
	}
	return true, nil
}
