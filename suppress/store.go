package suppress

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/scriptop"
)

// Sources of an entry.
const (
	SourceInbound  = "inbound"  // a STOP (or START) the recipient replied
	SourceProvider = "provider" // a provider's refusal: Twilio 21610, Vonage's opted-out receipt
	SourceOperator = "operator" // dispatcher suppressions add|remove
	SourceImport   = "import"   // dispatcher suppressions import
)

// Actions of a change.
const (
	ActionAdd    = "add"
	ActionRemove = "remove"
)

// LogCap bounds the change log (approximately, XADD MAXLEN ~): a process
// further behind than that loads the list again.
const LogCap = 100_000

//go:embed change.lua
var changeLua string

var changeScript = redis.NewScript(changeLua)

// OpChange is change.lua's name for the Redis-calls figures: never per
// message, only per change of the list.
const OpChange = "suppress"

func init() { scriptop.Register(OpChange, changeLua) }

// An Entry is one change of the list, or what the list holds of a
// number: when, the source, the account it came through ("" for an
// operator's) and a reason.
type Entry struct {
	Number  string    `json:"number"`
	Action  string    `json:"action,omitempty"`
	Source  string    `json:"source"`
	Account string    `json:"account"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// value is e as the list's hash and the log keep it, compact:
// "<unix ms>|<source>|<account>|<reason>".
func (e Entry) value() string {
	return strconv.FormatInt(e.At.UnixMilli(), 10) + "|" + e.Source + "|" + e.Account + "|" + e.Reason
}

// parseValue reads number's entry from its value.
func parseValue(number, v string) (Entry, error) {
	f := strings.SplitN(v, "|", 4)
	if len(f) != 4 {
		return Entry{}, fmt.Errorf("suppress: bad entry %q", v)
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("suppress: bad entry time %q", f[0])
	}
	return Entry{Number: number, Source: f[1], Account: f[2], Reason: f[3], At: time.UnixMilli(ms).UTC()}, nil
}

// A Mirror is told of every change the Store is asked for, for the
// deployment's own record of the list (SUPPRESSIONS_TOPIC), whether or
// not the list changed: a request retried after its publish failed (a
// STOP answered 503, an add or an import run again) finds the list
// changed already, and its publish is the one that counts. So the
// mirror is told at least once of every change, and a mirror that
// records it must be idempotent. Mirror must not block: its owner waits
// for what it published (TopicMirror.Wait).
type Mirror interface {
	Mirror(ctx context.Context, e Entry)
}

// MirrorJSON is a change as the mirror publishes it:
// {"number","action","source","account","reason","at"}, at in RFC 3339.
func MirrorJSON(e Entry) []byte {
	b, _ := json.Marshal(e) // strings and a time: it cannot fail
	return b
}

// Store is the list in Redis. Names are keys.Suppress()'s unless set
// (tests use a tag of their own).
type Store struct {
	rdb    redis.Cmdable
	names  keys.Suppressions
	mirror Mirror // nil: none
}

// NewStore returns the list kept by rdb under names ("": keys.Suppress()),
// telling mirror (may be nil) of every change.
func NewStore(rdb redis.Cmdable, names keys.Suppressions, mirror Mirror) *Store {
	if names == "" {
		names = keys.Suppress()
	}
	return &Store{rdb: rdb, names: names, mirror: mirror}
}

// Add puts e.Number on the list and reports whether it changed (a number
// already on it keeps its first entry). The mirror is told either way:
// of e, or of the first entry the list keeps.
func (s *Store) Add(ctx context.Context, e Entry) (bool, error) {
	e.Action = ActionAdd
	return s.change(ctx, e)
}

// Remove takes e.Number off the list and reports whether it was on it.
// The mirror is told of e either way.
func (s *Store) Remove(ctx context.Context, e Entry) (bool, error) {
	e.Action = ActionRemove
	return s.change(ctx, e)
}

func (s *Store) change(ctx context.Context, e Entry) (bool, error) {
	if _, err := Key(e.Number); err != nil {
		return false, err
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC().Truncate(time.Millisecond)
	res, err := changeScript.Run(ctx, s.rdb, s.keys(), s.args(e)...).Slice()
	if err != nil {
		return false, fmt.Errorf("suppress: %s %s: %w", e.Action, maskedForError(e.Number), err)
	}
	changed, mirrored, err := changeReply(e, res)
	if err != nil {
		return false, err
	}
	if s.mirror != nil {
		s.mirror.Mirror(ctx, mirrored)
	}
	return changed, nil
}

// changeReply reads change.lua's reply to the change e: whether the list
// changed, and what the mirror is told: e, or for an add of a number on
// the list already, the first entry it keeps.
func changeReply(e Entry, res []any) (changed bool, mirrored Entry, err error) {
	if len(res) < 2 || len(res) > 3 {
		return false, Entry{}, fmt.Errorf("suppress: change.lua answered %v", res)
	}
	flag, ok := res[0].(int64)
	if !ok {
		return false, Entry{}, fmt.Errorf("suppress: change.lua answered %v", res)
	}
	if len(res) == 2 {
		return flag == 1, e, nil
	}
	v, ok := res[2].(string)
	if !ok {
		return false, Entry{}, fmt.Errorf("suppress: change.lua answered %v", res)
	}
	first, err := parseValue(e.Number, v)
	if err != nil {
		return false, Entry{}, err
	}
	first.Action = e.Action
	return false, first, nil
}

func (s *Store) keys() []string {
	return []string{s.names.List(), s.names.Log(), s.names.Seq()}
}

func (s *Store) args(e Entry) []any {
	return []any{e.Action, e.Number, e.value(), LogCap}
}

// maskedForError keeps a number out of an error in clear: its last 4
// digits only, as provider.MaskNumber does for the logs.
func maskedForError(n string) string {
	if len(n) <= 6 {
		return strings.Repeat("*", len(n))
	}
	return "+" + strings.Repeat("*", len(n)-5) + n[len(n)-4:]
}

// Get returns number's entry, and whether it is on the list.
func (s *Store) Get(ctx context.Context, number string) (Entry, bool, error) {
	v, err := s.rdb.HGet(ctx, s.names.List(), number).Result()
	if errors.Is(err, redis.Nil) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	e, err := parseValue(number, v)
	return e, err == nil, err
}

// Len is how many numbers the list holds.
func (s *Store) Len(ctx context.Context) (int64, error) {
	return s.rdb.HLen(ctx, s.names.List()).Result()
}

// inboundKeep is how long an inbound message's id is remembered: a
// provider retries a webhook for hours, not days.
const inboundKeep = 24 * time.Hour

// FirstInbound marks the inbound message id of account handled and
// reports whether this is its first delivery; ForgetInbound undoes it, for a
// delivery whose handling failed.
func (s *Store) FirstInbound(ctx context.Context, account, id string) (bool, error) {
	return s.rdb.SetNX(ctx, s.names.Inbound(account, id), "1", inboundKeep).Result()
}

// ForgetInbound unmarks the inbound message id of account: its handling
// failed, and the provider's retry handles it again.
func (s *Store) ForgetInbound(ctx context.Context, account, id string) error {
	return s.rdb.Del(ctx, s.names.Inbound(account, id)).Err()
}

// refusedKeep is how long the record of a stopped message is kept, as
// long as a message's story is worth asking about.
const refusedKeep = 7 * 24 * time.Hour

// Refused records that the list stopped the message id at at, by the
// entry e of its number (dispatcher message reads it back).
func (s *Store) Refused(ctx context.Context, id string, at time.Time, e Entry) error {
	v := strconv.FormatInt(at.UnixMilli(), 10) + "|" + e.Number + "|" + e.value()
	return s.rdb.Set(ctx, s.names.Refused(id), v, refusedKeep).Err()
}

// Refusal returns when the list stopped the message id and the entry
// that did, and whether it did (within refusedKeep).
func (s *Store) Refusal(ctx context.Context, id string) (at time.Time, e Entry, ok bool, err error) {
	v, err := s.rdb.Get(ctx, s.names.Refused(id)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, Entry{}, false, nil
	}
	if err != nil {
		return time.Time{}, Entry{}, false, err
	}
	f := strings.SplitN(v, "|", 3)
	ms, perr := strconv.ParseInt(f[0], 10, 64)
	if len(f) != 3 || perr != nil {
		return time.Time{}, Entry{}, false, fmt.Errorf("suppress: bad refusal of %s", id)
	}
	e, err = parseValue(f[1], f[2])
	return time.UnixMilli(ms), e, err == nil, err
}

// ScanPage is how many entries one HSCAN asks for: the list is never read
// in one call.
const ScanPage = 1000

// All reads the list in pages of ScanPage (HSCAN: the list is never read
// in one call) and yields each entry, until the caller stops or an error,
// yielded last. An entry may come twice across pages (HSCAN's promise),
// never be missed if it stayed on the list throughout.
func (s *Store) All(ctx context.Context) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for cursor := uint64(0); ; {
			page, next, err := s.scan(ctx, cursor)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, e := range page {
				if !yield(e, nil) {
					return
				}
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	}
}

// scan reads one page of the list from cursor (0: the start) and returns
// its entries and the next cursor (0: the end).
func (s *Store) scan(ctx context.Context, cursor uint64) ([]Entry, uint64, error) {
	kv, next, err := s.rdb.HScan(ctx, s.names.List(), cursor, "", ScanPage).Result()
	if err != nil {
		return nil, 0, err
	}
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		e, err := parseValue(kv[i], kv[i+1])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, next, nil
}

// ImportBatch is how many adds one pipeline of Import carries.
const ImportBatch = 1000

// Import adds entries, each at most once (an add of a number on the list
// changes nothing: importing an export twice is harmless), in pipelines
// of ImportBatch, and returns how many numbers it added. The source is
// the entry's own (an export keeps it), SourceImport when it has none.
// The mirror is told of every entry, added or not (as Add tells it): an
// import run again after its publish failed publishes again.
func (s *Store) Import(ctx context.Context, entries []Entry) (int, error) {
	added := 0
	for start := 0; start < len(entries); start += ImportBatch {
		batch := entries[start:min(start+ImportBatch, len(entries))]
		if err := changeScript.Load(ctx, s.rdb).Err(); err != nil {
			return added, err
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i := range batch {
			e := &batch[i]
			e.Action = ActionAdd
			if e.Source == "" {
				e.Source = SourceImport
			}
			if e.At.IsZero() {
				e.At = time.Now()
			}
			e.At = e.At.UTC().Truncate(time.Millisecond)
			cmds[i] = changeScript.EvalSha(ctx, pipe, s.keys(), s.args(*e)...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return added, fmt.Errorf("suppress: import: %w", err)
		}
		for i, c := range cmds {
			res, err := c.Slice()
			if err != nil {
				return added, fmt.Errorf("suppress: import: %w", err)
			}
			changed, mirrored, err := changeReply(batch[i], res)
			if err != nil {
				return added, fmt.Errorf("suppress: import: %w", err)
			}
			if changed {
				added++
			}
			if s.mirror != nil {
				s.mirror.Mirror(ctx, mirrored)
			}
		}
	}
	return added, nil
}

// Recent counts the log's changes since since, by source and action
// ("inbound add": 3), reading at most LogCap entries in pages.
func (s *Store) Recent(ctx context.Context, since time.Time) (map[string]int, error) {
	counts := map[string]int{}
	from := strconv.FormatInt(since.UnixMilli(), 10)
	for {
		msgs, err := s.rdb.XRangeN(ctx, s.names.Log(), from, "+", ScanPage).Result()
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			e, err := parseChange(m)
			if err != nil {
				return nil, err
			}
			counts[e.Source+" "+e.Action]++
		}
		if len(msgs) < ScanPage {
			return counts, nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// parseChange reads one log entry: its change and its number in the log.
func parseChange(m redis.XMessage) (change, error) {
	q, _ := m.Values["q"].(string)
	a, _ := m.Values["a"].(string)
	n, _ := m.Values["n"].(string)
	v, _ := m.Values["e"].(string)
	seq, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		return change{}, fmt.Errorf("suppress: log entry %s: bad number %q", m.ID, q)
	}
	e, err := parseValue(n, v)
	if err != nil {
		return change{}, err
	}
	e.Action = a
	return change{Entry: e, seq: seq, id: m.ID}, nil
}

// change is one entry of the log.
type change struct {
	Entry
	seq int64  // its number: the counter after it
	id  string // its stream id
}
