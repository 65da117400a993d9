package guard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
)

// The operator's side (dispatcher guard, dispatcher status): the blocks
// of a class read from Redis, and a range blocked or released by hand.
// Each takes the blocks' hash and publishes on its channel, so every
// process hears of it at once.

// List returns class's blocks in force at now, by range.
func List(ctx context.Context, rdb Redis, class string, now time.Time) ([]Block, error) {
	m, err := rdb.HGetAll(ctx, keys.GuardOf(class).Blocks()).Result()
	if err != nil {
		return nil, fmt.Errorf("guard: read the blocks of %s: %w", class, err)
	}
	var out []Block
	for r, v := range m {
		if b, ok := decodeBlock(r, v); ok && now.Before(b.Until) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Block) int { return strings.Compare(a.Range, b.Range) })
	return out, nil
}

// RangeOf is the range of an operator's prefix ("+447700": "447700"), or
// an error naming what it wants.
func RangeOf(prefix string) (string, error) {
	r, ok := strings.CutPrefix(strings.TrimSpace(prefix), "+")
	if !ok || r == "" || len(r) > 15 || strings.Trim(r, "0123456789") != "" {
		return "", fmt.Errorf("want a prefix such as +447700 (+ then 1 to 15 digits), got %q", prefix)
	}
	return r, nil
}

// BlockRange blocks prefix's range for class (reason operator) from now for
// d, replacing any block of that range.
func BlockRange(ctx context.Context, rdb Redis, class, prefix string, d time.Duration, now time.Time) error {
	r, err := RangeOf(prefix)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("want a positive duration, got %v", d)
	}
	b := Block{Range: r, Reason: ReasonOperator, Until: now.Add(d)}
	return adminScript.Run(ctx, rdb, []string{keys.GuardOf(class).Blocks()}, r, "block", b.encode()).Err()
}

// UnblockRange lifts the block of prefix's range for class and forgets its
// counts; removed says whether there was one.
func UnblockRange(ctx context.Context, rdb Redis, class, prefix string) (removed bool, err error) {
	r, err := RangeOf(prefix)
	if err != nil {
		return false, err
	}
	n, err := adminScript.Run(ctx, rdb, []string{keys.GuardOf(class).Blocks()}, r, "unblock").Int()
	return n == 1, err
}

// Noted returns the note of the message id blocked in one of classes, and
// whether there is one.
func Noted(ctx context.Context, rdb Redis, classes []string, id string) (Note, bool, error) {
	for _, c := range classes {
		v, err := rdb.Get(ctx, keys.GuardOf(c).Blocked(id)).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return Note{}, false, fmt.Errorf("guard: read the note of %s: %w", id, err)
		}
		f := strings.Fields(v)
		if len(f) != 3 {
			continue
		}
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		return Note{Class: c, Reason: f[0], Account: f[1], At: time.UnixMilli(ms)}, true, nil
	}
	return Note{}, false, nil
}
