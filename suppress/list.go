package suppress

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// FollowBlock is how long one read of the log waits for a change: the
// read answers as soon as one is appended, so it bounds nothing but the
// idle reads (one each FollowBlock per process).
const FollowBlock = time.Second

// retryAfter spaces the reads of a Redis that failed: the List keeps what
// it has meanwhile.
const retryAfter = time.Second

// errGap is a log entry whose number is not the next one: changes were
// missed (the log was trimmed past this process, or Redis lost the list).
var errGap = errors.New("suppress: the log skipped changes; loading the list again")

// sources numbers an entry's source in memory (one byte a number); 0 is a
// source this version does not know.
var sources = [...]string{"", SourceInbound, SourceProvider, SourceOperator, SourceImport}

func sourceIndex(s string) uint8 {
	for i, v := range sources {
		if v == s {
			return uint8(i)
		}
	}
	return 0
}

// A List is the process's copy of the list: the numbers' keys (Key) and
// each one's source, loaded at start and kept current by following the
// log (Run).
type List struct {
	store  *Store
	logger *slog.Logger

	mu  sync.RWMutex
	set map[uint64]uint8 // number's key -> its source's index; guarded by mu

	loaded   atomic.Bool
	loadedCh chan struct{} // closed at the first load
	// position in the log: the last change applied (its stream id and
	// number); Run's alone.
	from string
	seq  int64
}

// NewList returns the List of store, empty until Run has loaded it.
func NewList(store *Store, logger *slog.Logger) *List {
	if logger == nil {
		logger = slog.Default()
	}
	return &List{store: store, logger: logger, set: map[uint64]uint8{}, loadedCh: make(chan struct{})}
}

// Suppressed reports whether number is on the list, and the source of
// its entry. No Redis call: the copy in memory answers.
func (l *List) Suppressed(number string) (source string, ok bool) {
	k, err := Key(number)
	if err != nil {
		return "", false
	}
	l.mu.RLock()
	i, ok := l.set[k]
	l.mu.RUnlock()
	if !ok {
		return "", false
	}
	if sources[i] == "" {
		return "unknown", true
	}
	return sources[i], true
}

// Len is how many numbers the copy holds.
func (l *List) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.set)
}

// Loaded is closed once the whole list has been loaded.
func (l *List) Loaded() <-chan struct{} { return l.loadedCh }

// Apply makes the copy say what e, a change this process just made in
// the Store, says, before the log brings it back (applying it twice is
// harmless).
func (l *List) Apply(e Entry) {
	k, err := Key(e.Number)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Action == ActionRemove {
		delete(l.set, k)
		return
	}
	l.set[k] = sourceIndex(e.Source)
}

// Run loads the list (unless Load did), then follows its log until ctx
// ends, loading it again after a gap; while Redis fails it keeps the copy
// it has and asks again every second. It returns nil when ctx ends. Run
// once, after Load if at all.
func (l *List) Run(ctx context.Context) error {
	fresh := l.loaded.Load()
	for ctx.Err() == nil {
		var err error
		if !fresh {
			err = l.Load(ctx)
			fresh = err == nil
		}
		if fresh {
			err = l.follow(ctx)
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errGap):
			l.logger.Warn("suppressions: the log skipped changes; loading the list again")
			fresh = false
		case err != nil:
			l.logger.Warn("suppressions: Redis did not answer; deciding on the list as last read", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(retryAfter):
			}
		}
	}
	return nil
}

// Load reads the log's position, then the whole list in pages, and
// replaces the copy: a change made during the scan is in the log after
// that position, and Run applies it again. Not concurrently with Run.
func (l *List) Load(ctx context.Context) error {
	n := l.store.names
	var seq *redis.StringCmd
	var last *redis.XMessageSliceCmd
	if _, err := l.store.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		seq = p.Get(ctx, n.Seq())
		last = p.XRevRangeN(ctx, n.Log(), "+", "-", 1)
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	from, q := "0-0", int64(0)
	if v, err := seq.Result(); err == nil {
		q, _ = strconv.ParseInt(v, 10, 64)
	}
	if msgs, err := last.Result(); err == nil && len(msgs) > 0 {
		from = msgs[0].ID
	}
	set := make(map[uint64]uint8, max(l.Len(), 64))
	for e, err := range l.store.All(ctx) {
		if err != nil {
			return err
		}
		if k, err := Key(e.Number); err == nil {
			set[k] = sourceIndex(e.Source)
		}
	}
	l.mu.Lock()
	l.set = set
	l.mu.Unlock()
	l.from, l.seq = from, q
	if l.loaded.CompareAndSwap(false, true) {
		close(l.loadedCh)
	}
	return nil
}

// follow applies the log's changes after the List's position, in order,
// until ctx ends, an error, or a gap (errGap).
func (l *List) follow(ctx context.Context) error {
	for {
		res, err := l.store.rdb.XRead(ctx, &redis.XReadArgs{
			Streams: []string{l.store.names.Log(), l.from}, Count: ScanPage, Block: FollowBlock,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue // no change within the block
		}
		if err != nil {
			return err
		}
		for _, s := range res {
			for _, m := range s.Messages {
				c, err := parseChange(m)
				if err != nil {
					return err
				}
				if c.seq != l.seq+1 {
					return errGap
				}
				l.Apply(c.Entry)
				l.from, l.seq = c.id, c.seq
			}
		}
	}
}
