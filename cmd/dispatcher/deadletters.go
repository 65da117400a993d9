package main

// `dispatcher deadletters`: read the dead letters people inspect
// (docs/contract.md section 1) without consuming them, and replay the ones
// whose cause is fixed.
//
// Both commands read the inspect subscription with unary Pull and hold
// what they read: a message held is leased to this process (deadLetterLease,
// extended while held), so it is not redelivered and every Pull brings new
// ones; what is not acked is nacked back at the end. A process that dies
// holding messages loses none: their lease runs out and Pub/Sub delivers
// them again.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
)

const deadlettersUsage = `usage: dispatcher deadletters list|replay [flags]

  list    print the dead letters of the inspect subscription, consuming none
  replay  republish selected dead letters to their class's topic, once their
          cause is fixed (--reason R, --id ID or --all)

Run 'dispatcher deadletters <list|replay> -h' for the flags.
`

// runDeadletters is `dispatcher deadletters`.
func runDeadletters(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "list":
		return runDeadlettersList(ctx, args, stdout, stderr)
	case "replay":
		return runDeadlettersReplay(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, deadlettersUsage)
		return nil
	}
	fmt.Fprint(stderr, deadlettersUsage)
	if sub == "" {
		return errors.New("deadletters: give list or replay")
	}
	return fmt.Errorf("deadletters: unknown command %q", sub)
}

// attrReplays is the count of replays this command keeps on what it
// republishes. Besides it, the attributes of a dead letter that are not the
// producer's are the reserved ones (dispatch.ReservedAttr): the
// dispatcher's and Pub/Sub's.
const attrReplays = "replays"

// sourceSubscriptionAttr names the subscription a letter that Pub/Sub's
// dead-letter policy forwarded came from.
const sourceSubscriptionAttr = dispatch.PubSubDeadLetterPrefix + "SourceSubscription"

// Reading the inspect subscription.
const (
	// deadLetterLease is the lease this process holds on each dead letter
	// it read, renewed every third of it while held: one left behind by a
	// killed process is delivered again within about this long.
	deadLetterLease = 10 * time.Second
	// deadLetterRPC bounds an ack, a nack or a lease renewal.
	deadLetterRPC = 10 * time.Second
	// maxAckIDs bounds the ack IDs of one request (Pub/Sub takes 2,500
	// and 512 KB).
	maxAckIDs = 1000
)

// deadLetter is one dead letter as read, and what it says.
type deadLetter struct {
	msgID     string // the dead letter's own Pub/Sub message ID
	published time.Time
	data      []byte
	attrs     map[string]string

	origID    string // original_message_id, "" when absent
	id        string // the message's id: its data's, else the stand-in; "" when the data is no JSON object
	dataID    bool   // the data carries an id
	class     string // otp, marketing, or "" when unknown
	reason    string // reject_reason, "" when absent
	to        string // never printed as is
	hasTo     bool
	body      string // printed with --show-body only
	hasBody   bool
	replays   int
	truncated bool // original_data_bytes is set: the data was cut
}

// parseDeadLetter reads what a dead letter says. Its data is read as the
// dispatcher reads it (dispatch.Decode) where it can be, and leniently
// otherwise, so that the id and the number of a malformed message still
// show.
func parseDeadLetter(m *pubsubpb.PubsubMessage, cfg config.Settings) *deadLetter {
	dl := &deadLetter{msgID: m.GetMessageId(), data: m.GetData(), attrs: m.GetAttributes()}
	if t := m.GetPublishTime(); t != nil {
		dl.published = t.AsTime().UTC()
	}
	if dl.attrs == nil {
		dl.attrs = map[string]string{}
	}
	dl.replays, _ = strconv.Atoi(dl.attrs[attrReplays]) // absent or unreadable: 0
	dl.replays = max(dl.replays, 0)
	if src, forwarded := dl.attrs[sourceSubscriptionAttr]; forwarded {
		// Forwarded by a subscription's dead-letter policy, with the
		// producer's attributes as they were: a class or a reason among
		// them is the producer's word. The subscription says the class.
		switch {
		case src == cfg.OTPSubscription || strings.HasSuffix(src, "/"+cfg.OTPSubscription):
			dl.class = admission.OTP.String()
		case src == cfg.MarketingSubscription || strings.HasSuffix(src, "/"+cfg.MarketingSubscription):
			dl.class = admission.Marketing.String()
		}
	} else {
		// Made by the dispatcher, which sets these over the producer's.
		dl.class = dl.attrs[dispatch.AttrClass]
		dl.origID = dl.attrs[dispatch.AttrOriginalMessageID]
		dl.reason = dl.attrs[dispatch.AttrRejectReason]
		_, dl.truncated = dl.attrs[dispatch.AttrOriginalDataBytes]
	}
	if _, err := admission.ParseClass(dl.class); err != nil {
		dl.class = ""
	}

	// By exact name, as dispatch.Decode reads them ("To" is another field).
	var w map[string]json.RawMessage
	trimmed := bytes.TrimSpace(dl.data)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &w) != nil {
		return dl
	}
	str := func(raw json.RawMessage) (string, bool) {
		var s *string
		if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s == nil {
			return "", false
		}
		return *s, true
	}
	dl.id, dl.dataID = str(w["id"])
	if !dl.dataID {
		dl.id = dl.standInID()
	}
	dl.to, dl.hasTo = str(w["to"])
	dl.body, dl.hasBody = str(w["body"])
	return dl
}

// standInID is the id of a message whose data has none: the Pub/Sub
// message ID of the original, as the dispatcher took it (contract section
// 2), or, for a dead letter that does not name it, its own.
func (dl *deadLetter) standInID() string {
	if dl.origID != "" {
		return dl.origID
	}
	return dl.msgID
}

// bodyChars is the body's length in characters, 0 when it has none.
func (dl *deadLetter) bodyChars() int {
	return utf8.RuneCountInString(dl.body)
}

// maskNumber shows only the last 4 characters of a phone number (and the
// leading +); a value of 6 characters or fewer is masked whole. "-" when
// there is none.
func maskNumber(to string, ok bool) string {
	if !ok || to == "" {
		return "-"
	}
	r := []rune(to)
	if len(r) <= 6 {
		return strings.Repeat("*", len(r))
	}
	prefix := ""
	if r[0] == '+' {
		prefix, r = "+", r[1:]
	}
	stars := min(len(r)-4, 15)
	return prefix + strings.Repeat("*", stars) + printable(string(r[len(r)-4:]))
}

// printable replaces control characters (a reason may hold a provider's
// answer), so that each dead letter stays on its line.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deadLetterReader reads the inspect subscription: it pulls until no
// dead letter it had not seen arrived for wait, or limit were seen, and
// holds each one until it is acked or, at the end, nacked back.
type deadLetterReader struct {
	api   *vkit.SubscriptionAdminClient
	sub   string // projects/<project>/subscriptions/<id>
	cfg   config.Settings
	wait  time.Duration
	limit int // 0: none
	batch int32

	mu   sync.Mutex
	held map[string]*heldLetter // by Pub/Sub message ID; guarded by mu

	seen int // distinct dead letters handed out; read's alone

	limited bool // reading stopped at limit
}

// heldLetter is one dead letter this process was delivered: its latest
// ack ID, and whether it was acked.
type heldLetter struct {
	ackID string
	acked bool
}

func newDeadLetterReader(ps *pubsub.Client, cfg config.Settings, wait time.Duration, limit int, batch int32) *deadLetterReader {
	sub := cfg.DeadLetterInspect
	if !strings.HasPrefix(sub, "projects/") {
		sub = fmt.Sprintf("projects/%s/subscriptions/%s", ps.Project(), sub)
	}
	return &deadLetterReader{api: ps.SubscriptionAdminClient, sub: sub, cfg: cfg, wait: wait, limit: limit, batch: batch,
		held: map[string]*heldLetter{}}
}

// read hands each dead letter not seen before to handle, one at a time,
// in the order Pub/Sub delivers them; handle may ack it (r.ack). Every
// one left unacked is nacked back when read returns. A redelivery of one
// already seen (a lost lease, or Pub/Sub's at-least-once) is not handed
// out again: it is held in its place, or acked again when it was acked.
func (r *deadLetterReader) read(ctx context.Context, handle func(dl *deadLetter)) error {
	keeperCtx, stopKeeper := context.WithCancel(ctx)
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		r.keepLeases(keeperCtx)
	}()
	defer func() {
		stopKeeper()
		<-keeperDone
		r.nackHeld(context.WithoutCancel(ctx))
	}()

	// last is when the last new dead letter arrived (or was handled); zero
	// until the first Pull is answered, so that connecting to Pub/Sub is
	// not taken for a quiet subscription.
	var last time.Time
	for {
		if r.limit > 0 && r.seen >= r.limit {
			r.limited = true
			return nil
		}
		left := r.wait
		if !last.IsZero() {
			if left -= time.Since(last); left <= 0 {
				return nil
			}
		}
		pctx, cancel := context.WithTimeout(ctx, left)
		resp, err := r.api.Pull(pctx, &pubsubpb.PullRequest{Subscription: r.sub, MaxMessages: r.batch})
		cancel()
		if last.IsZero() {
			last = time.Now()
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
				continue // nothing within the wait
			}
			return fmt.Errorf("deadletters: pull %s: %w", r.sub, err)
		}
		got := resp.GetReceivedMessages()
		if len(got) == 0 {
			continue
		}
		var fresh []*pubsubpb.ReceivedMessage
		var ackIDs, reack []string
		r.mu.Lock()
		for _, rm := range got {
			id := rm.GetMessage().GetMessageId()
			ackIDs = append(ackIDs, rm.GetAckId())
			if h, ok := r.held[id]; ok {
				h.ackID = rm.GetAckId()
				if h.acked {
					reack = append(reack, rm.GetAckId())
				}
				continue
			}
			r.held[id] = &heldLetter{ackID: rm.GetAckId()}
			fresh = append(fresh, rm)
		}
		r.mu.Unlock()
		// Lease them for deadLetterLease rather than the subscription's
		// ack deadline: were this process to die, they come back soon.
		r.modack(ctx, ackIDs, deadLetterLease)
		if len(reack) > 0 {
			r.ackIDs(ctx, reack) // best effort: an ack that was lost
		}
		for _, rm := range fresh {
			if r.limit > 0 && r.seen >= r.limit {
				r.limited = true
				break // held, and nacked back at the end
			}
			r.seen++
			handle(parseDeadLetter(rm.GetMessage(), r.cfg))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if len(fresh) > 0 {
			last = time.Now()
		}
	}
}

// ack acks dl on the inspect subscription and waits for the answer. It
// is not bounded by ctx's end: an ack that follows a republish must go
// out even once the operator pressed ^C.
func (r *deadLetterReader) ack(ctx context.Context, dl *deadLetter) error {
	r.mu.Lock()
	h := r.held[dl.msgID]
	ackID := ""
	if h != nil {
		ackID = h.ackID
	}
	r.mu.Unlock()
	if ackID == "" {
		return errors.New("not held") // cannot happen: read hands out only what it holds
	}
	if err := r.ackIDs(ctx, []string{ackID}); err != nil {
		return err
	}
	r.mu.Lock()
	h.acked = true
	r.mu.Unlock()
	return nil
}

func (r *deadLetterReader) ackIDs(ctx context.Context, ids []string) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadLetterRPC)
	defer cancel()
	if err := r.api.Acknowledge(actx, &pubsubpb.AcknowledgeRequest{Subscription: r.sub, AckIds: ids}); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// modack sets the ack deadline of ids to d (0: nack), in chunks; errors
// are left alone: a lease that runs out only brings a message back.
func (r *deadLetterReader) modack(ctx context.Context, ids []string, d time.Duration) {
	for chunk := range slices.Chunk(ids, maxAckIDs) {
		mctx, cancel := context.WithTimeout(ctx, deadLetterRPC)
		r.api.ModifyAckDeadline(mctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: r.sub, AckIds: chunk, AckDeadlineSeconds: int32(d / time.Second)})
		cancel()
	}
}

// unacked returns the ack IDs of the dead letters held and not acked.
func (r *deadLetterReader) unacked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, h := range r.held {
		if !h.acked {
			ids = append(ids, h.ackID)
		}
	}
	return ids
}

// keepLeases renews the lease of every dead letter held, every third of
// deadLetterLease, until ctx ends.
func (r *deadLetterReader) keepLeases(ctx context.Context) {
	tick := time.NewTicker(deadLetterLease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if ids := r.unacked(); len(ids) > 0 {
				r.modack(ctx, ids, deadLetterLease)
			}
		}
	}
}

// nackHeld gives every dead letter held and not acked back to the
// subscription, to be read again at once.
func (r *deadLetterReader) nackHeld(ctx context.Context) {
	ids := r.unacked()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, deadLetterRPC)
	defer cancel()
	r.modack(ctx, ids, 0)
	r.mu.Lock()
	r.held = map[string]*heldLetter{}
	r.mu.Unlock()
}

// deadLetterFilter is the selection both commands share.
type deadLetterFilter struct {
	reason string        // prefix of reject_reason
	class  string        // otp, marketing or ""
	since  time.Duration // published within it; 0: any time
	ids    map[string]bool
	now    time.Time
}

// match reports whether dl is selected: every filter given must hold. An
// --id matches the message's id, the dead letter's Pub/Sub message ID or
// the original's.
func (f deadLetterFilter) match(dl *deadLetter) bool {
	switch {
	case f.reason != "" && !strings.HasPrefix(dl.reason, f.reason):
		return false
	case f.class != "" && dl.class != f.class:
		return false
	case f.since > 0 && dl.published.Before(f.now.Add(-f.since)):
		return false
	case f.ids != nil && !f.ids[dl.id] && !f.ids[dl.msgID] && !(dl.origID != "" && f.ids[dl.origID]):
		return false
	}
	return true
}

// classFlag checks --class.
func classFlag(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	c, err := admission.ParseClass(v)
	if err != nil {
		return "", fmt.Errorf("--class: want otp or marketing, got %q", v)
	}
	return c.String(), nil
}

// deadLetterJSON is one line of `deadletters list --json`. The field names
// are stable (docs/operating.md, "Dead letters").
type deadLetterJSON struct {
	PublishTime       string  `json:"publish_time"`
	MessageID         string  `json:"message_id"`
	OriginalMessageID string  `json:"original_message_id"`
	ID                string  `json:"id"`
	Class             string  `json:"class"`
	RejectReason      string  `json:"reject_reason"`
	ToMasked          string  `json:"to_masked"`
	BodyChars         int     `json:"body_chars"`
	Replays           int     `json:"replays"`
	Body              *string `json:"body,omitempty"`
}

// runDeadlettersList is `dispatcher deadletters list`.
func runDeadlettersList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletters list", stderr)
	load := configFlags(fs, config.Pubsub|config.Subscriptions, environ)
	reason := fs.String("reason", "", "only dead letters whose reject_reason starts with this (provider, invalid: bad_to, max_attempts, ...)")
	class := fs.String("class", "", "only this class: otp or marketing")
	since := fs.Duration("since", 0, "only dead letters published within this long (such as 1h)")
	limit := fs.Int("limit", 1000, "read at most this many dead letters (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object per dead letter (docs/operating.md, \"Dead letters\")")
	showBody := fs.Bool("show-body", false, "print the message bodies too (they may hold codes and personal data)")
	wait := fs.Duration("wait", 2*time.Second, "stop reading once no new dead letter arrived for this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("deadletters list: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	f := deadLetterFilter{reason: *reason, since: *since, now: time.Now()}
	if f.class, err = classFlag(*class); err != nil {
		return err
	}
	switch {
	case *since < 0:
		return errors.New("--since: must not be negative")
	case *limit < 0:
		return errors.New("--limit: must not be negative")
	case *wait <= 0:
		return errors.New("--wait: must be positive")
	}

	ps, err := newPubsub(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	r := newDeadLetterReader(ps, cfg, *wait, *limit, 100)
	var all, shown []*deadLetter
	err = r.read(ctx, func(dl *deadLetter) {
		all = append(all, dl)
		if f.match(dl) {
			shown = append(shown, dl)
		}
	})
	if err != nil {
		return err
	}
	slices.SortFunc(shown, func(a, b *deadLetter) int {
		if c := a.published.Compare(b.published); c != 0 {
			return c
		}
		return strings.Compare(a.msgID, b.msgID)
	})
	if r.limited {
		fmt.Fprintf(stderr, "read the first %d dead letters (--limit); there may be more\n", *limit)
	}
	if len(shown) == 0 {
		note := stdout
		if *asJSON {
			note = stderr // stdout stays JSON lines
		}
		if len(all) == 0 {
			fmt.Fprintln(note, "no dead letters")
		} else {
			fmt.Fprintf(note, "no dead letters match (%d read)\n", len(all))
		}
		return nil
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		for _, dl := range shown {
			v := deadLetterJSON{
				PublishTime: dl.published.Format(time.RFC3339Nano), MessageID: dl.msgID, OriginalMessageID: dl.origID,
				ID: dl.id, Class: dl.class, RejectReason: dl.reason, BodyChars: dl.bodyChars(), Replays: dl.replays,
			}
			if v.ToMasked = maskNumber(dl.to, dl.hasTo); v.ToMasked == "-" {
				v.ToMasked = ""
			}
			if *showBody && dl.hasBody {
				v.Body = &dl.body
			}
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	head := "PUBLISHED\tID\tCLASS\tTO\tCHARS\tREPLAYS\tREASON"
	if *showBody {
		head += "\tBODY"
	}
	fmt.Fprintln(tw, head)
	for _, dl := range shown {
		chars := "-"
		if dl.hasBody {
			chars = strconv.Itoa(dl.bodyChars())
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s", dl.published.Format(time.RFC3339), printable(dash(dl.id)), dash(dl.class),
			maskNumber(dl.to, dl.hasTo), chars, dl.replays, printable(dash(dl.reason)))
		if *showBody {
			body := "-"
			if dl.hasBody {
				body = strconv.Quote(dl.body)
			}
			line += "\t" + body
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// idList is --id: given again or comma-separated.
type idList []string

func (l *idList) String() string { return strings.Join(*l, ",") }

func (l *idList) Set(v string) error {
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			*l = append(*l, id)
		}
	}
	return nil
}

// Why replay leaves a dead letter where it is (or, for sent, acks it
// without republishing): the summary's words.
const (
	skipFiltered    = "filtered"       // not selected by --reason, --id, --class
	skipMalformed   = "malformed"      // reject_reason invalid: …, without --force
	skipTruncated   = "truncated"      // data cut to 64 KiB: the original is gone
	skipMaxReplays  = "max_replays"    // replayed --max-replays times already
	skipNoClass     = "no_class"       // no class attribute: no topic to go to
	skipSent        = "sent"           // its id was sent: acked, never sent twice
	skipHeld        = "held"           // its id is being sent right now
	skipUnknownRecd = "unknown_record" // its id's record says something this command does not know
	skipNoID        = "no_id"          // no id the dispatcher could have recorded: a replay could not be checked
	skipExpired     = "record_expired" // older than the send-once records: it may have been sent since
	skipNew         = "new"            // dead-lettered after this replay started: the cause may not be fixed
)

// recordMargin is how much younger than the send-once record's lifetime a
// dead letter must be for its id's record to be trusted when it has none.
const recordMargin = time.Hour

// replayPublishTimeout bounds one republish.
const replayPublishTimeout = 30 * time.Second

// testDieAfterEnv names a test-only hook: in a test binary (testing.Testing),
// `deadletters replay` SIGKILLs itself right after its N-th republish,
// before the ack, so that a test can show that such a death loses nothing.
// A production binary never reads it.
const testDieAfterEnv = "SMS_TEST_DEADLETTERS_DIE_AFTER"

// replayer is one run of `deadletters replay`.
type replayer struct {
	cfg        config.Settings
	filter     deadLetterFilter
	force      bool
	dryRun     bool
	quiet      bool
	maxReplays int
	dieAfter   int // test-only hook, see testDieAfterEnv; 0: off

	r      *deadLetterReader
	ps     *pubsub.Client
	pubs   map[string]*pubsub.Publisher // by topic
	rdb    redis.UniversalClient
	setups []config.Account
	homes  [2][]int
	lims   map[int]*admission.Limiter // by account index
	logger *slog.Logger
	out    io.Writer

	started                       time.Time // dead letters published after it are left listed
	replayed, failed, republished int
	skipped                       map[string]int
}

// runDeadlettersReplay is `dispatcher deadletters replay`.
func runDeadlettersReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletters replay", stderr)
	load := configFlags(fs, config.Pubsub|config.Subscriptions|config.Redis|config.Accounts, environ)
	reason := fs.String("reason", "", "replay the dead letters whose reject_reason starts with this (provider, max_attempts, ...)")
	var ids idList
	fs.Var(&ids, "id", "replay the dead letter of this id (the message's id, or a Pub/Sub message ID); repeat it or separate by commas")
	all := fs.Bool("all", false, "replay every dead letter")
	class := fs.String("class", "", "only this class: otp or marketing")
	dryRun := fs.Bool("dry-run", false, "print what would be done; change nothing (every dead letter is left listed)")
	maxReplays := fs.Int("max-replays", 3, "skip a dead letter replayed this many times already")
	force := fs.Bool("force", false, "replay also what replay cannot vouch for: malformed dead letters (reject_reason invalid: ...; they come back unless the data was fixed), and those whose send-once record cannot be checked (no id, or older than the records' 24 h)")
	quiet := fs.Bool("quiet", false, "print only the summary")
	wait := fs.Duration("wait", 2*time.Second, "stop reading once no new dead letter arrived for this long")
	limit := fs.Int("limit", 0, "read at most this many dead letters (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("deadletters replay: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	given := 0
	for _, g := range []bool{*reason != "", len(ids) > 0, *all} {
		if g {
			given++
		}
	}
	switch {
	case given != 1:
		return errors.New("deadletters replay: give exactly one of --reason, --id and --all")
	case *maxReplays < 1:
		return errors.New("--max-replays: must be at least 1")
	case *limit < 0:
		return errors.New("--limit: must not be negative")
	case *wait <= 0:
		return errors.New("--wait: must be positive")
	}
	p := &replayer{cfg: cfg, force: *force, dryRun: *dryRun, quiet: *quiet, maxReplays: *maxReplays,
		pubs: map[string]*pubsub.Publisher{}, lims: map[int]*admission.Limiter{}, skipped: map[string]int{}, out: stdout,
		logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	p.filter = deadLetterFilter{reason: *reason, now: time.Now()}
	p.started = p.filter.now
	if len(ids) > 0 {
		p.filter.ids = map[string]bool{}
		for _, id := range ids {
			p.filter.ids[id] = true
		}
	}
	if p.filter.class, err = classFlag(*class); err != nil {
		return err
	}
	if p.rdb, err = operatorRedis(cfg, "replay reads and clears the send-once records in the limiter's Redis", operatorTimeout); err != nil {
		return err
	}
	defer p.rdb.Close()
	if p.setups, err = cfg.Accounts(); err != nil {
		return err
	}
	p.homes = routes(p.setups)
	if testing.Testing() {
		p.dieAfter, _ = strconv.Atoi(os.Getenv(testDieAfterEnv))
	}

	if p.ps, err = newPubsub(ctx, cfg.ProjectID, ""); err != nil {
		return err
	}
	defer p.ps.Close()
	defer func() {
		for _, pub := range p.pubs {
			pub.Stop()
		}
	}()
	// One at a time: what this process holds unhandled is what a kill
	// would hide from the others until its lease runs out.
	p.r = newDeadLetterReader(p.ps, cfg, *wait, *limit, 1)
	readErr := p.r.read(ctx, func(dl *deadLetter) { p.handle(ctx, dl) })

	fmt.Fprintln(stdout, p.summary())
	if p.r.limited {
		fmt.Fprintf(stderr, "read the first %d dead letters (--limit); there may be more\n", *limit)
	}
	if readErr != nil {
		return readErr
	}
	if p.failed > 0 {
		return fmt.Errorf("deadletters replay: %d failed; they are left listed: run replay again", p.failed)
	}
	return nil
}

// summary is the last line of a replay.
func (p *replayer) summary() string {
	skipped := 0
	var why []string
	for _, k := range slices.Sorted(maps.Keys(p.skipped)) {
		skipped += p.skipped[k]
		why = append(why, fmt.Sprintf("%s %d", k, p.skipped[k]))
	}
	s := fmt.Sprintf("replayed %d, skipped %d", p.replayed, skipped)
	if p.dryRun {
		s = fmt.Sprintf("dry run, nothing changed: would replay %d, would skip %d", p.replayed, skipped)
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s + fmt.Sprintf(", failed %d", p.failed)
}

// report prints one line for a dead letter acted on: what was done
// (replayed, skipped or failed; "would replay", "would skip" in a dry
// run), its class and id, and why.
func (p *replayer) report(dl *deadLetter, what, detail string) {
	if p.quiet {
		return
	}
	if p.dryRun && what != "failed" {
		what = map[string]string{"replayed": "would replay", "skipped": "would skip"}[what]
	}
	fmt.Fprintf(p.out, "%-12s %-9s %s: %s\n", what, dash(dl.class), printable(dash(dl.id)), printable(detail))
}

func (p *replayer) skip(dl *deadLetter, why, detail string) {
	p.skipped[why]++
	p.report(dl, "skipped", why+": "+detail)
}

func (p *replayer) fail(dl *deadLetter, detail string) {
	p.failed++
	p.report(dl, "failed", detail)
}

// handle decides what becomes of one dead letter and does it, in the
// order that loses none if the process dies between any two steps:
// checks that change nothing, then the id's send-once record (cleared
// only when it says refused), then the republish, and only once the
// republish is confirmed, the ack. A dead letter not acked is nacked back
// when reading ends.
func (p *replayer) handle(ctx context.Context, dl *deadLetter) {
	if !p.filter.match(dl) {
		p.skipped[skipFiltered]++
		return
	}
	switch {
	case dl.published.After(p.started):
		// A replay whose cause is not fixed comes back within seconds:
		// replayed again in the same run, it would use up --max-replays.
		p.skip(dl, skipNew, "dead-lettered after this replay started: left listed")
		return
	case strings.HasPrefix(dl.reason, "invalid:") && !p.force:
		p.skip(dl, skipMalformed, dl.reason+" (it would only come back; --force replays it)")
		return
	case dl.truncated:
		p.skip(dl, skipTruncated, fmt.Sprintf("its data was cut from %s bytes to 64 KiB: the message is gone", dl.attrs[dispatch.AttrOriginalDataBytes]))
		return
	case dl.replays >= p.maxReplays:
		p.skip(dl, skipMaxReplays, fmt.Sprintf("replayed %d times already (--max-replays %d)", dl.replays, p.maxReplays))
		return
	case dl.class == "":
		p.skip(dl, skipNoClass, "no class attribute: its topic is unknown")
		return
	}
	class, _ := admission.ParseClass(dl.class)
	topic := p.cfg.OTPTopic
	if class == admission.Marketing {
		topic = p.cfg.MarketingTopic
	}

	// The message as it will be republished, and the id it will be sent
	// under: the dispatcher's reading of it.
	data, sendID := dl.data, ""
	if m, err := dispatch.Decode(dl.data, dl.standInID()); err == nil {
		sendID = m.ID
		if !dl.dataID {
			// The stand-in id is the original's Pub/Sub message ID; the
			// republished message has another, so the id is written into
			// the data: a replay repeated after a crash is then the same
			// id, which the send-once record keeps from a second send.
			// Without the original's ID (a dead letter Pub/Sub forwarded
			// itself) the id the dispatcher recorded is unknown.
			if dl.origID == "" && !p.force {
				p.skip(dl, skipNoID, "no id in its data and no original_message_id: whether it was sent cannot be checked (--force replays it)")
				return
			}
			if data = withID(dl.data, sendID); bytes.Equal(data, dl.data) && !p.force {
				p.skip(dl, skipNoID, "its stand-in id could not be written into its data: a replay could not be checked (--force replays it)")
				return
			}
		}
	} else if dl.id != "" {
		sendID = dl.id // malformed, replayed with --force: its record is still checked
	}

	note := "" // what became of the id's record
	if sendID != "" {
		was, cleared, err := p.record(ctx, class, sendID)
		if err != nil {
			p.fail(dl, "send-once record: "+err.Error())
			return
		}
		switch {
		case was == admission.RecordSent || strings.HasPrefix(was, admission.RecordSent+":"):
			if p.dryRun {
				p.skip(dl, skipSent, fmt.Sprintf("already sent (record %q): would not be republished; the dead letter would be acked", was))
				return
			}
			if err := p.r.ack(ctx, dl); err != nil {
				p.fail(dl, fmt.Sprintf("already sent (record %q), not republished; its %v: it stays listed", was, err))
				return
			}
			p.skip(dl, skipSent, fmt.Sprintf("already sent (record %q): not republished; dead letter acked", was))
			return
		case was == "held":
			p.skip(dl, skipHeld, "being sent right now (a live send claim): left listed")
			return
		case was == "" && time.Since(dl.published) > admission.DefaultRecordTTL-recordMargin && !p.force:
			// The record of a dead letter this old may have said sent and
			// expired since (a replay that was killed before its ack).
			p.skip(dl, skipExpired, fmt.Sprintf("dead-lettered %s ago, and send-once records live %s: it may have been sent since (--force replays it)",
				time.Since(dl.published).Round(time.Minute), admission.DefaultRecordTTL))
			return
		case was == "":
		case was == admission.RecordRejected || strings.HasPrefix(was, "refused:"):
			switch {
			case p.dryRun:
				note = fmt.Sprintf("; its record %q would be cleared", was)
			case cleared:
				note = fmt.Sprintf("; its record %q was cleared", was)
			default: // Forget clears these: a record that stays would make the replay a duplicate
				p.skip(dl, skipUnknownRecd, fmt.Sprintf("its send-once record %q was not cleared: left listed", was))
				return
			}
		default:
			p.skip(dl, skipUnknownRecd, fmt.Sprintf("its send-once record says %q: left listed", was))
			return
		}
	}

	attrs := map[string]string{}
	for k, v := range dl.attrs {
		if !dispatch.ReservedAttr(k) && k != attrReplays {
			attrs[k] = v
		}
	}
	attrs[attrReplays] = strconv.Itoa(dl.replays + 1)
	if p.dryRun {
		p.replayed++
		p.report(dl, "replayed", fmt.Sprintf("to %s (replays %d)%s", topic, dl.replays+1, note))
		return
	}

	pub := p.pubs[topic]
	if pub == nil {
		pub = p.ps.Publisher(topic)
		p.pubs[topic] = pub
	}
	// Not cut by ^C: once its record is cleared, the publish's outcome
	// must be known (the publisher would flush it at its Stop anyway).
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replayPublishTimeout)
	serverID, err := pub.Publish(pctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(pctx)
	cancel()
	if err != nil {
		p.fail(dl, fmt.Sprintf("publish to %s: %v; left listed", topic, err))
		return
	}
	p.republished++
	if p.dieAfter > 0 && p.republished >= p.dieAfter {
		dieForTest()
	}
	if err := p.r.ack(ctx, dl); err != nil {
		p.fail(dl, fmt.Sprintf("republished to %s as %s, but its %v: it stays listed, and a replay finds it sent or sends it once", topic, serverID, err))
		return
	}
	p.replayed++
	p.report(dl, "replayed", fmt.Sprintf("to %s as %s (replays %d)%s", topic, serverID, dl.replays+1, note))
}

// record reads the send-once record of id on the class's home account
// (the first account serving it keeps its ids' records) and, unless this
// is a dry run, clears it when it says the provider refused the id
// (admission.Claims.Forget). It returns what the record said: "" none,
// "held", "sent", "sent:<provider id>", "rejected" or "refused:<why>".
func (p *replayer) record(ctx context.Context, class admission.Class, id string) (was string, cleared bool, err error) {
	home := p.homes[class][0]
	lim := p.lims[home]
	if lim == nil {
		if lim, err = operatorLimiter(p.rdb, p.cfg, p.setups[home], operatorTimeout, p.logger); err != nil {
			return "", false, err
		}
		p.lims[home] = lim
	}
	if p.dryRun {
		was, err := lim.Claims().Recorded(ctx, id)
		return was, false, err
	}
	return lim.Claims().Forget(ctx, id)
}

// withID returns data, a valid message without an id, with "id": id
// written first into its object, everything else kept byte for byte; data
// itself when that does not give a valid message of that id.
func withID(data []byte, id string) []byte {
	i := bytes.IndexByte(data, '{')
	if i < 0 {
		return data
	}
	q, _ := json.Marshal(id)
	out := make([]byte, 0, len(data)+len(q)+6)
	out = append(out, data[:i+1]...)
	out = append(out, `"id":`...)
	out = append(out, q...)
	out = append(out, ',')
	out = append(out, data[i+1:]...)
	if m, err := dispatch.Decode(out, ""); err != nil || m.ID != id {
		return data
	}
	return out
}

// dieForTest ends the process as SIGKILL does: no deferred call, no
// flush. Only the test hook of testDieAfterEnv calls it.
func dieForTest() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
	select {}
}
