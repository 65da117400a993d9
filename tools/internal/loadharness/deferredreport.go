package loadharness

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

// deferredTally counts the deferred scenario's publishes by id, as
// pstest receives them (a Publish reactor): the row's ids are prefix and
// an index below n. It runs under pstest's lock, and lets pstest handle
// each request after counting it.
type deferredTally struct {
	prefix, topic string
	mu            sync.Mutex
	start         time.Time
	counts        []uint8 // publishes of each index, at most 255
	distinct      int
	extra         int // publishes of an id after its first
	strays        int // publishes of no id of the row (or unreadable)
	wrongTopic    int
	perSecond     []int // first publishes, by second from start
	last          time.Duration
	firstExtra    time.Duration // the first publish after an id's first, from start
}

func newDeferredTally(prefix, topic string, n int) *deferredTally {
	return &deferredTally{prefix: prefix, topic: topic, counts: make([]uint8, n)}
}

// id is the row's id of index i.
func (t *deferredTally) id(i int) string { return t.prefix + fmt.Sprintf("%09d", i) }

// begin sets the release's start, from which publishes are timed.
func (t *deferredTally) begin(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = at
}

// React counts a Publish request's messages; pstest then handles it.
func (t *deferredTally) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.PublishRequest); ok {
		t.record(r, time.Now())
	}
	return false, nil, nil
}

// record counts r's messages as published at.
func (t *deferredTally) record(r *pubsubpb.PublishRequest, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sec := int(max(at.Sub(t.start), 0) / time.Second)
	for _, m := range r.Messages {
		i, ok := t.index(m.Data)
		switch {
		case r.Topic != t.topic:
			t.wrongTopic++
		case !ok:
			t.strays++
		case t.counts[i] > 0:
			if t.extra++; t.extra == 1 {
				t.firstExtra = at.Sub(t.start)
			}
			t.counts[i] = min(t.counts[i], 254) + 1
		default:
			t.counts[i] = 1
			t.distinct++
			for len(t.perSecond) <= sec {
				t.perSecond = append(t.perSecond, 0)
			}
			t.perSecond[sec]++
			t.last = at.Sub(t.start)
		}
	}
}

// index is the row's index of the id in data, a message's JSON.
func (t *deferredTally) index(data []byte) (int, bool) {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(m.ID, t.prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= len(t.counts) || t.id(i) != m.ID {
		return 0, false
	}
	return i, true
}

// complete reports whether every id was published.
func (t *deferredTally) complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct == len(t.counts)
}

// tallySum is a tally's figures.
type tallySum struct {
	Published  int           // publishes of the row's ids
	Distinct   int           // ids published
	Twice      int           // ids published more than once
	Extra      int           // publishes after an id's first
	Lost       int           // ids never published
	Strays     int           // publishes of no id of the row
	WrongTopic int           // publishes to another topic
	Last       time.Duration // the last id's first publish, from the start
	Peak       int           // the most first publishes in a second
	Gap        int           // the most seconds in a row without a first publish, before the last
	FirstExtra time.Duration // the first second publish, from the start (0: none)
}

func (t *deferredTally) sum() tallySum {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := tallySum{Published: t.distinct + t.extra, Distinct: t.distinct, Extra: t.extra, Lost: len(t.counts) - t.distinct,
		Strays: t.strays, WrongTopic: t.wrongTopic, Last: t.last, FirstExtra: t.firstExtra}
	for _, c := range t.counts {
		if c > 1 {
			s.Twice++
		}
	}
	gap := 0
	for _, n := range t.perSecond {
		s.Peak = max(s.Peak, n)
		if gap++; n > 0 {
			gap = 0
		}
		s.Gap = max(s.Gap, gap)
	}
	return s
}

// deferredRow is one deferred row's figures.
type deferredRow struct {
	Spec                 deferredSpec
	DataBytes            float64       // a message's data, mean
	StoreTime            time.Duration // storing every message
	MemBefore, MemStored uint64        // used_memory before the stores and after
	MemAfter             uint64        // ... and after the release
	Tally                tallySum
	Empty                time.Duration // from the opening until every id was published and the store empty (or the wait ended)
	TimedOut             bool
	ByReleaser           []int64 // messages each releaser released
	Warnings             int     // the releasers' warnings
	FirstWarning         string  // the first one's message
	Scripts, Commands    int64   // Redis's, during the release
	ScriptMicros         int64   // Redis's time in the scripts (their usec), during the release
	Left                 int64   // due ids, envelopes and claims left stored; -1: unread
	Load                 string  // the load average at the row's end
	Failures             []string
}

// perMessage is n over the row's messages.
func (r *deferredRow) perMessage(n float64) float64 { return n / float64(r.Spec.messages) }

// bytesPerMessage is the store's used_memory per message.
func (r *deferredRow) bytesPerMessage() float64 {
	return r.perMessage(float64(r.MemStored) - float64(r.MemBefore))
}

// deferredJudge returns the failures of r: a message lost, published
// twice, published elsewhere, left stored, or a release not done in time.
func deferredJudge(r *deferredRow) []string {
	var out []string
	t := r.Tally
	if t.Lost > 0 {
		out = append(out, fmt.Sprintf("%d lost", t.Lost))
	}
	if t.Twice > 0 {
		out = append(out, fmt.Sprintf("%d published twice", t.Twice))
	}
	if t.Strays+t.WrongTopic > 0 {
		out = append(out, fmt.Sprintf("%d publishes of no row's id, %d to another topic", t.Strays, t.WrongTopic))
	}
	if r.Left != 0 {
		out = append(out, fmt.Sprintf("%d left stored", r.Left))
	}
	if r.TimedOut {
		out = append(out, "not released within its spread and "+deferredSlack.String())
	}
	return out
}

// deferredVerdict fails (errScenarioFailed) when a row missed.
func deferredVerdict(rows []*deferredRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("deferred %s %v: %s", r.Spec.code, r.Spec.spread, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
}

// writeDeferredTable writes the deferred rows, and what each column is.
func writeDeferredTable(w io.Writer, _ *Config, rows []*deferredRow) error {
	fmt.Fprintf(w, "scenario deferred: messages stored by deferral.Store.Judge (%d at once over %d clients), released by %d releasers (pages of %d) to pstest\n",
		deferredStorers, deferredProcesses, deferredProcesses, deferredPage)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "code\tspread\tmessages\tdata B\tstore s\tstored/s\tRedis B/msg\tafter MiB\trelease s\tempty s\tpeak/s\tby releaser\tscripts/msg\tcommands/msg\tRedis µs/msg\tlost\ttwice\t2nd at s\tgap s\twarnings\tleft\tload\tverdict\t")
	for _, r := range rows {
		v := "ok"
		if len(r.Failures) > 0 {
			v = "FAIL: " + strings.Join(r.Failures, "; ")
		}
		by := make([]string, len(r.ByReleaser))
		for i, n := range r.ByReleaser {
			by[i] = strconv.FormatInt(n, 10)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%s\t%.4f\t%.2f\t%.1f\t%d\t%d\t%.1f\t%d\t%d\t%d\t%s\t%s\t\n",
			r.Spec.code, r.Spec.spread, r.Spec.messages, r.DataBytes, r.StoreTime.Seconds(), float64(r.Spec.messages)/r.StoreTime.Seconds(),
			r.bytesPerMessage(), float64(r.MemAfter-min(r.MemAfter, r.MemBefore))/(1<<20), r.Tally.Last.Seconds(), r.Empty.Seconds(), r.Tally.Peak,
			strings.Join(by, "/"), r.perMessage(float64(r.Scripts)), r.perMessage(float64(r.Commands)), r.perMessage(float64(r.ScriptMicros)), r.Tally.Lost, r.Tally.Twice, r.Tally.FirstExtra.Seconds(), r.Tally.Gap, r.Warnings, r.Left, r.Load, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Warnings > 0 {
			fmt.Fprintf(w, "%s %v: first warning: %s\n", r.Spec.code, r.Spec.spread, r.FirstWarning)
		}
	}
	fmt.Fprintln(w, "data B: a message's data as published (with its id and deadline written in); Redis B/msg: used_memory after the stores less before, per message; "+
		"after MiB: used_memory after the release over before; release s: the opening to the last id's first publish; empty s: to every id published and the store empty; "+
		"peak/s: the most first publishes in a second; by releaser: messages each released; scripts, commands/msg: Redis's (INFO commandstats) during the release; Redis µs/msg: its time in the scripts (their usec); "+
		"lost: ids never published; twice: ids published more than once; 2nd at s: the first publish of an id published before, from the opening; gap s: the most seconds in a row without a first publish; warnings: the releasers' (the first's message below); left: ids, envelopes and claims still stored; load: the load average at the row's end")
	return nil
}

// loadAverage is /proc/loadavg's three averages ("" where unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
