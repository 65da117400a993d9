package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
)

// The sender pool's limits: what the design is tested at (a pool's cost
// per admission is O(log N), and pool.lua builds an index in one call)
// and how many distinct sender rates it takes (the admission script reads each rate's
// index on every admission).
const (
	MaxPoolSize  = 10_000
	MaxPoolRates = 8
)

// poolIndexTTL is how long an index of the pool lives: one of a pool no
// longer configured goes away, and one in use is built again (one call of
// pool.lua) when it has.
const poolIndexTTL = 24 * time.Hour

// A pool is the sender pool's part of the keys of the admission script and pool.lua:
// an index (a sorted set) per distinct sender interval, named by a hash of
// the whole pool's configuration so that two configurations (a rolling
// deploy) never read each other's members, while the senders' TAT keys,
// which both write, keep every sender within its rate.
type pool struct {
	floor     string   // {sms:<a>}:tat:sender:, the floor and the prefix of the senders' TAT keys
	indexes   []string // one per interval, in the order of intervals
	intervals string   // the admission script's ARGV[20]
	counts    string   // senders per index, space-separated
	members   []string // the senders' From, index after index
	from      map[string]bool
}

// newPool returns the pool of cfg's senders (the zero pool without one).
func newPool(cfg Config, key keys.Account) pool {
	if len(cfg.Senders) == 0 {
		return pool{}
	}
	byInterval := map[int64][]string{}
	var lines []string
	for _, s := range cfg.Senders {
		iv := senderInterval(s.RPS, cfg.ArrivalJitter).Microseconds()
		byInterval[iv] = append(byInterval[iv], s.From)
		lines = append(lines, strconv.FormatInt(iv, 10)+" "+s.From)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	hash := hex.EncodeToString(sum[:8])
	p := pool{floor: key.SenderTATs(), from: map[string]bool{}}
	var ivs, counts []string
	for _, iv := range slices.Sorted(maps.Keys(byInterval)) {
		s := strconv.FormatInt(iv, 10)
		ivs = append(ivs, s)
		p.indexes = append(p.indexes, key.PoolIndex(hash, s))
		counts = append(counts, strconv.Itoa(len(byInterval[iv])))
		p.members = append(p.members, byInterval[iv]...)
	}
	for _, m := range p.members {
		p.from[m] = true
	}
	p.intervals, p.counts = strings.Join(ivs, " "), strings.Join(counts, " ")
	return p
}

// keys returns the admission script's KEYS[12+R+W..]: the floor, then the indexes.
func (p pool) keys() []string {
	if len(p.indexes) == 0 {
		return nil
	}
	return append([]string{p.floor}, p.indexes...)
}

// build runs pool.lua: the indexes that are missing are built from the
// senders' TATs.
func (p pool) build(ctx context.Context, rdb redis.Scripter) error {
	c := poolCall{Indexes: p.indexes, Prefix: p.floor, Millis: poolIndexTTL.Milliseconds(), Counts: p.counts, Members: p.members}
	if err := poolScript.Run(ctx, rdb, c.keys(), c.argv()...).Err(); err != nil {
		return fmt.Errorf("pool build: %w", err)
	}
	return nil
}

// sender checks the From the admission script answered ("": none).
func (p pool) sender(v any) (string, error) {
	s, ok := v.(string)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: sender %T", ErrBadReply, v)
	case s != "" && !p.from[s]:
		return "", fmt.Errorf("%w: sender %q is not in the pool", ErrBadReply, s)
	}
	return s, nil
}

// poolMissing says that v is the admission script's reply of a missing index.
func poolMissing(v []any) bool {
	return len(v) == replyLen && v[replyReason] == int64(codePoolMissing)
}
