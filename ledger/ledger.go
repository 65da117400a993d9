package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
)

// A Guard runs a call to Redis within timeout, or refuses it at once
// while Redis is known to be down (admission.Circuit is the process's).
type Guard interface {
	Do(ctx context.Context, timeout time.Duration, call func(context.Context) error) error
}

// Config is what a Ledger of one account needs to know.
type Config struct {
	Account   string
	RecordTTL time.Duration // how long a record, and its story, lives
	Timeout   time.Duration // each call's bound
	// Route is the route rule as receipt.lua's ARGV[8] ('' off): a
	// first-class message's finals count in its route's skip.
	Route string
	// Classes are the classes' names, in priority order, whose delivery
	// statistics DeliveryStats reads.
	Classes []string
	Guard   Guard            // nil: each call asks Redis, bounded by Timeout
	Now     func() time.Time // the process's clock; nil: time.Now
}

// A Ledger keeps what happened to each sent message of one account in
// Redis: its story, its delivery receipts folded into it, the status
// events owed for it, and the account's delivery statistics. It is safe
// for concurrent use.
type Ledger struct {
	rdb redis.Scripter
	cfg Config
	key keys.Account

	mu sync.Mutex
	// Guarded by mu.
	// published are the events EventPublished noted, pairs of an id and
	// the owed version published, for the next receipt.lua call to clear;
	// owedSeen are the owed versions of the events Receipt or Owed
	// returned, by id, oldest first.
	published []string
	owedSeen  map[string][]int64
	cleared   time.Time // when a receipt.lua call last carried published events
	// counts are the delivery counts the folds made and no call wrote
	// yet; countsWritten is when a call last took them, countsTimer the
	// flush armed while some wait (counts.go).
	counts        deliveryCounts
	countsWritten time.Time
	countsTimer   *time.Timer
	// handOutAfter is the package's handOutAfter; a test changes it.
	handOutAfter time.Duration
}

// New returns the Ledger of cfg.Account in rdb.
func New(rdb redis.Scripter, cfg Config) *Ledger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Ledger{rdb: rdb, cfg: cfg, key: keys.For(cfg.Account), owedSeen: map[string][]int64{}, handOutAfter: handOutAfter}
}

// do runs call through the Guard, or within the timeout without one.
func (g *Ledger) do(ctx context.Context, call func(context.Context) error) error {
	if g.cfg.Guard != nil {
		return g.cfg.Guard.Do(ctx, g.cfg.Timeout, call)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	return call(ctx)
}

// PIDKey is the key of a provider id ({sms:<account>}:pid:<provider id>),
// the id cut to the length a record keeps: a message's story at its first
// part's, the way to it at the others'.
func PIDKey(k keys.Account, pid string) string {
	return k.PID(pid[:min(len(pid), maxProviderID)])
}

func (g *Ledger) pidKey(pid string) string { return PIDKey(g.key, pid) }
