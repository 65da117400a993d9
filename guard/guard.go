package guard

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/scriptop"
)

// The names of the guard's scripts in the Redis-calls figures.
const (
	OpSent   = "guard-sent"
	OpVerify = "guard-verify"
	OpAdmin  = "guard-admin"
)

var (
	//go:embed sent.lua
	sentLua string
	//go:embed verify.lua
	verifyLua string
	//go:embed admin.lua
	adminLua string

	sentScript   = redis.NewScript(sentLua)
	verifyScript = redis.NewScript(verifyLua)
	adminScript  = redis.NewScript(adminLua)
)

func init() {
	scriptop.Register(OpSent, sentLua)
	scriptop.Register(OpVerify, verifyLua)
	scriptop.Register(OpAdmin, adminLua)
}

// Redis is what the guard asks of its client: its scripts and a read of
// the blocks. A client that can also Subscribe (go-redis's clients can)
// hears new blocks at once; without, the poll alone brings them.
type Redis interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
}

// subscriber is a Redis client that can subscribe to the blocks' channels.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Options are a Guard's optional parts.
type Options struct {
	// Publish publishes a blocked message's status event (its data and
	// attributes) to STATUS_TOPIC; nil: none is.
	Publish func(ctx context.Context, data []byte, attrs map[string]string) error
	// Now tells the time; nil: time.Now.
	Now func() time.Time
	// Poll is how often the blocks are read again without a push; zero:
	// DefaultPoll.
	Poll time.Duration
	// Logger logs; nil: slog.Default().
	Logger *slog.Logger
	// Counted is told each send Sent counts in a class's ranges
	// (sms_guard_sends_total); nil: nobody is.
	Counted func(class, to string)
	// Linger is how long a class's counter waits, once it takes a queued
	// send, for more to count in the same call; zero: DefaultLinger.
	Linger time.Duration
}

// DefaultPoll is how often every process reads the blocks again, the
// bound on how late a block reaches it when the push is lost.
const DefaultPoll = 500 * time.Millisecond

// DefaultLinger is how long a counter waits for more sends before its
// call. A longer linger is fewer calls, and a later block: a range over
// its brake is sent to until its block is set, and an attack of 40 sends
// a second gets 2 more through a linger of 50 ms, 4 through one of 100 ms,
// where the target is at most count + 5 with the call and the push's own
// delay (dispatch's three-process test of the brake, whose sends come
// faster, went over it at 100 ms). A block set 50 ms later still reaches
// every process well within its second.
const DefaultLinger = 50 * time.Millisecond

// maxBatch bounds the sends one call of sent.lua counts.
const maxBatch = 256

// queueSize bounds the sends a class's counter holds while its call is
// out; past it a send goes uncounted, and the log says so once a minute.
const queueSize = 4096

// A Guard applies the classes' rules of one process. Its methods are safe
// for concurrent use; Run keeps its blocks and counts its sends.
type Guard struct {
	rdb     Redis
	opts    Options
	classes map[string]*class
	names   []string // the classes', sorted
	seq     atomic.Uint64
	// instance makes each send's member of a rate window unique across
	// processes.
	instance string
	// notes are the blocked messages whose note (Note) Run writes; a note
	// that finds it full is dropped: it is for an operator's question.
	notes chan note
}

// note is one blocked message's note to write.
type note struct{ key, value string }

// class is one guarded class's state in the process.
type class struct {
	name  string
	rules *policy.Guard
	keys  keys.Guard
	queue chan sent

	mu     sync.RWMutex
	blocks map[string]Block // by range; guarded by mu
}

// sent is one send to count.
type sent struct{ id, member, rate, conv string }

// New returns the guard of rules, the guarded classes' (a nil or empty
// rule guards nothing, and no class without one is read from Redis).
// instance names the process (unique among them).
func New(rdb Redis, rules map[string]*policy.Guard, instance string, opts Options) *Guard {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Guard{rdb: rdb, opts: opts, classes: map[string]*class{}, instance: instance, notes: make(chan note, queueSize)}
	for name, r := range rules {
		if !r.On() {
			continue
		}
		g.classes[name] = &class{name: name, rules: r, keys: keys.GuardOf(name), queue: make(chan sent, queueSize), blocks: map[string]Block{}}
		g.names = append(g.names, name)
	}
	slices.Sort(g.names)
	return g
}

// Blocks returns why the guard blocks a message of class with id to
// number to, "" when it lets it go. A blocked message's status event is
// published (Options.Publish) with account, the message's home. It reads
// memory only.
func (g *Guard) Blocks(ctx context.Context, className, id, to, account string) string {
	c := g.classes[className]
	if c == nil {
		return ""
	}
	c.mu.RLock()
	reason := decide(c.rules, c.blocks, to, g.opts.Now())
	c.mu.RUnlock()
	if reason != "" {
		g.announce(ctx, className, id, account, reason)
		select {
		case g.notes <- note{c.keys.Blocked(id), Note{Reason: reason, Account: account, At: g.opts.Now()}.encode()}:
		default:
		}
	}
	return reason
}

// Event is a blocked message's status event on STATUS_TOPIC.
type Event struct {
	ID       string `json:"id"`
	Status   string `json:"status"` // "blocked"
	Reason   string `json:"reason"`
	Class    string `json:"class"`
	Account  string `json:"account"`
	StatusAt string `json:"status_at"`
}

// StatusBlocked is a blocked message's status.
const StatusBlocked = "blocked"

// announce publishes the status event of a blocked message. The
// publisher retries on its own; a failure is logged: the message stays
// blocked, and acked.
func (g *Guard) announce(ctx context.Context, className, id, account, reason string) {
	if g.opts.Publish == nil {
		return
	}
	data, _ := json.Marshal(Event{ID: id, Status: StatusBlocked, Reason: reason, Class: className, Account: account,
		StatusAt: g.opts.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")})
	attrs := map[string]string{"id": id, "class": className, "status": StatusBlocked}
	if err := g.opts.Publish(context.WithoutCancel(ctx), data, attrs); err != nil {
		g.opts.Logger.Warn("could not publish a blocked message's status event", "id", id, "class", className, "err", err)
	}
}

// Sent counts a send of class with id to number to (a message handed to
// a provider, whatever its answer) in the class's ranges. It only queues
// it: Run's counter takes it to Redis within Options.Linger and a call.
func (g *Guard) Sent(className, id, to string) {
	c := g.classes[className]
	if c == nil {
		return
	}
	rate, conv := counted(c.rules, to)
	if rate == "" && conv == "" {
		return
	}
	member := id + "/" + g.instance + "/" + strconv.FormatUint(g.seq.Add(1), 36)
	select {
	case c.queue <- sent{id: id, member: member, rate: rate, conv: conv}:
		if g.opts.Counted != nil {
			g.opts.Counted(className, to)
		}
	default:
		g.opts.Logger.Warn("guard's count is behind; a send goes uncounted", "class", className)
	}
}

// Run reads the blocks every Poll and on each push, and counts the
// queued sends, until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	if len(g.classes) == 0 {
		return
	}
	var wg sync.WaitGroup
	pushed := make(chan string, len(g.classes))
	for _, c := range g.classes {
		wg.Go(func() { g.count(ctx, c) })
	}
	wg.Go(func() { g.writeNotes(ctx) })
	if s, ok := g.rdb.(subscriber); ok {
		wg.Go(func() { g.listen(ctx, s, pushed) })
	}
	g.refresh(ctx)
	t := time.NewTicker(g.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case name := <-pushed:
			if c := g.classes[name]; c != nil {
				g.read(ctx, c)
			}
		case <-t.C:
			g.refresh(ctx)
		}
	}
}

// listen hands Run the class of each push on the blocks' channels.
func (g *Guard) listen(ctx context.Context, s subscriber, pushed chan<- string) {
	byChannel := map[string]string{}
	var channels []string
	for _, c := range g.classes {
		byChannel[c.keys.Blocks()] = c.name
		channels = append(channels, c.keys.Blocks())
	}
	ps := s.Subscribe(ctx, channels...)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			select {
			case pushed <- byChannel[m.Channel]:
			default: // a read is already due
			}
		}
	}
}

// refresh reads every class's blocks.
func (g *Guard) refresh(ctx context.Context) {
	for _, name := range g.names {
		g.read(ctx, g.classes[name])
	}
}

// readTimeout bounds one read of the blocks or one count.
const readTimeout = 2 * time.Second

// read replaces c's blocks by Redis's; on an error they stay as they
// were.
func (g *Guard) read(ctx context.Context, c *class) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	m, err := g.rdb.HGetAll(rctx, c.keys.Blocks()).Result()
	if err != nil {
		if ctx.Err() == nil {
			g.opts.Logger.Debug("could not read the guard's blocks; keeping the last", "class", c.name, "err", err)
		}
		return
	}
	blocks := make(map[string]Block, len(m))
	for r, v := range m {
		if b, ok := decodeBlock(r, v); ok {
			blocks[r] = b
		}
	}
	c.mu.Lock()
	c.blocks = blocks
	c.mu.Unlock()
}

// count takes c's queued sends to Redis: from the first it takes, it
// waits Options.Linger for more (at most maxBatch) and counts them all in
// one call. A send is counted within the call out when it queued, the
// linger and its own call. When ctx ends the sends in hand are counted;
// those still queued, or queued after, are not.
func (g *Guard) count(ctx context.Context, c *class) {
	for {
		var first sent
		select {
		case <-ctx.Done():
			return
		case first = <-c.queue:
		}
		batch := g.gather(ctx, c, first)
		if err := g.countBatch(ctx, c, batch); err != nil && ctx.Err() == nil {
			g.opts.Logger.Warn("could not count sends in the guard's ranges", "class", c.name, "sends", len(batch), "err", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// gather returns first and the sends of c that queue within the linger
// after it, at most maxBatch, or those queued until ctx ends.
func (g *Guard) gather(ctx context.Context, c *class, first sent) []sent {
	batch := []sent{first}
	linger := time.NewTimer(g.opts.Linger)
	defer linger.Stop()
	for len(batch) < maxBatch {
		select {
		case s := <-c.queue:
			batch = append(batch, s)
		case <-linger.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// countBatch runs sent.lua for batch and takes the blocks it set at once.
func (g *Guard) countBatch(ctx context.Context, c *class, batch []sent) error {
	r, cv := c.rules.MaxPerPrefix, c.rules.MinConversion
	argv := []any{g.opts.Now().UnixMilli(),
		r.Count, r.Per.Milliseconds(), r.BlockFor.Milliseconds(),
		cv.Ratio, cv.MinSends, cv.Per.Milliseconds(), cv.Grace.Milliseconds(), cv.BlockFor.Milliseconds()}
	for _, s := range batch {
		argv = append(argv, s.id, s.member, s.rate, s.conv)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	v, err := sentScript.Run(rctx, g.rdb, []string{c.keys.Blocks()}, argv...).Slice()
	if err != nil {
		return err
	}
	if len(v) > 0 {
		g.read(ctx, c) // the blocks as set, with their until
	}
	return nil
}

// Verified marks the code of the message id used, in every class that
// judges conversion; known reports whether id was a send still in one's
// window (an unknown or old id is ignored).
func (g *Guard) Verified(ctx context.Context, id string) (known bool, err error) {
	in, err := g.verifiedIn(ctx, id)
	return len(in) > 0, err
}

// verifiedIn marks the code of the message id used, as Verified, and
// returns the classes in whose window it was a send.
func (g *Guard) verifiedIn(ctx context.Context, id string) (in []string, err error) {
	for _, name := range g.names {
		c := g.classes[name]
		if c.rules.MinConversion.MinSends == 0 {
			continue
		}
		n, err := verifyScript.Run(ctx, g.rdb, []string{c.keys.OTP(id), c.keys.Blocks()}, id, c.rules.MinConversion.Per.Milliseconds(), g.opts.Now().UnixMilli()).Int()
		if err != nil {
			return in, fmt.Errorf("guard: verify: %w", err)
		}
		if n == 1 {
			in = append(in, name)
		}
	}
	return in, nil
}

// Held returns the blocks in force the process holds, of every class, by
// reason (sms_guard_blocks).
func (g *Guard) Held() map[string]int {
	now := g.opts.Now()
	out := map[string]int{}
	for _, c := range g.classes {
		c.mu.RLock()
		for _, b := range c.blocks {
			if now.Before(b.Until) {
				out[b.Reason]++
			}
		}
		c.mu.RUnlock()
	}
	return out
}

// NoteTTL is how long a blocked message's note is kept: as long as a sent
// message's record.
const NoteTTL = 24 * time.Hour

// A Note is what the guard keeps of a message it blocked, for `dispatcher
// message`.
type Note struct {
	Class, Reason, Account string
	At                     time.Time
}

func (n Note) encode() string {
	return n.Reason + " " + n.Account + " " + strconv.FormatInt(n.At.UnixMilli(), 10)
}

// writeNotes writes the blocked messages' notes until ctx ends, one call
// each: a blocked message is no message that passes.
func (g *Guard) writeNotes(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-g.notes:
			wctx, cancel := context.WithTimeout(ctx, readTimeout)
			if err := g.rdb.Set(wctx, n.key, n.value, NoteTTL).Err(); err != nil && ctx.Err() == nil {
				g.opts.Logger.Debug("could not note a blocked message", "err", err)
			}
			cancel()
		}
	}
}
