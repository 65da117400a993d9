package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/internal/topology"
)

// Reading the inspect subscription.
const (
	// lease is the lease this process holds on each dead letter it read,
	// renewed every third of it while held: one left behind by a killed
	// process is delivered again within about this long.
	lease = 10 * time.Second
	// rpcTimeout bounds an ack, a nack or a lease renewal.
	rpcTimeout = 10 * time.Second
	// maxAckIDs bounds the ack IDs of one request (Pub/Sub takes 2,500
	// and 512 KB).
	maxAckIDs = 1000
)

// Inspect says which dead letters to read, and how long to wait for them.
// List and Replay read with unary Pull and hold what they read: a dead
// letter held is leased to this process (extended while held), so it is
// not redelivered and every Pull brings new ones; what is not acked is
// nacked back at the end. A process that dies holding dead letters loses
// none: their lease runs out and Pub/Sub delivers them again.
type Inspect struct {
	// Subscription is the inspect subscription: an ID in the client's
	// project, or projects/<project>/subscriptions/<id>.
	Subscription string
	// Sources gives the class of each of the dispatcher's subscriptions,
	// in priority order (Parse).
	Sources []Source
	// Wait ends the reading once no new dead letter arrived for this long;
	// it must be positive.
	Wait time.Duration
	// Limit is the most dead letters read; 0 means no limit.
	Limit int
}

// reader reads the inspect subscription: it pulls until no dead letter it
// had not seen arrived for wait, or limit were seen, and holds each one
// until it is acked or, at the end, nacked back. Its ack may be called from
// handle; it is not otherwise safe for concurrent use.
type reader struct {
	api     *vkit.SubscriptionAdminClient
	sub     string // projects/<project>/subscriptions/<id>
	sources []Source
	wait    time.Duration
	limit   int // 0: none
	batch   int32

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

func newReader(ps *pubsub.Client, in Inspect, batch int32) *reader {
	sub := in.Subscription
	if !strings.HasPrefix(sub, "projects/") {
		sub = topology.SubscriptionName(ps.Project(), sub)
	}
	return &reader{api: ps.SubscriptionAdminClient, sub: sub, sources: in.Sources, wait: in.Wait, limit: in.Limit, batch: batch,
		held: map[string]*heldLetter{}}
}

// read hands each dead letter not seen before to handle, one at a time,
// in the order Pub/Sub delivers them; handle may ack it (r.ack). Every
// one left unacked is nacked back when read returns. A redelivery of one
// already seen (a lost lease, or Pub/Sub's at-least-once) is not handed
// out again: it is held in its place, or acked again when it was acked.
func (r *reader) read(ctx context.Context, handle func(l *Letter)) error {
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
		fresh := r.hold(ctx, resp.GetReceivedMessages())
		for _, rm := range fresh {
			if r.limit > 0 && r.seen >= r.limit {
				r.limited = true
				break // held, and nacked back at the end
			}
			r.seen++
			handle(Parse(rm.GetMessage(), r.sources))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if len(fresh) > 0 {
			last = time.Now()
		}
	}
}

// hold leases what a Pull brought and returns those not seen before.
func (r *reader) hold(ctx context.Context, got []*pubsubpb.ReceivedMessage) (fresh []*pubsubpb.ReceivedMessage) {
	if len(got) == 0 {
		return nil
	}
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
	// Lease them for lease rather than the subscription's ack deadline:
	// were this process to die, they come back soon.
	r.modack(ctx, ackIDs, lease)
	if len(reack) > 0 {
		r.ackIDs(ctx, reack) // best effort: an ack that was lost
	}
	return fresh
}

// ack acks l on the inspect subscription and waits for the answer. It is
// not bounded by ctx's end: an ack that follows a republish must go out
// even once the operator pressed ^C.
func (r *reader) ack(ctx context.Context, l *Letter) error {
	r.mu.Lock()
	h := r.held[l.MessageID]
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

func (r *reader) ackIDs(ctx context.Context, ids []string) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpcTimeout)
	defer cancel()
	if err := r.api.Acknowledge(actx, &pubsubpb.AcknowledgeRequest{Subscription: r.sub, AckIds: ids}); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// modack sets the ack deadline of ids to d (0: nack), in chunks; errors
// are left alone: a lease that runs out only brings a message back.
func (r *reader) modack(ctx context.Context, ids []string, d time.Duration) {
	for chunk := range slices.Chunk(ids, maxAckIDs) {
		mctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		r.api.ModifyAckDeadline(mctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: r.sub, AckIds: chunk, AckDeadlineSeconds: int32(d / time.Second)})
		cancel()
	}
}

// unacked returns the ack IDs of the dead letters held and not acked.
func (r *reader) unacked() []string {
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
// lease, until ctx ends.
func (r *reader) keepLeases(ctx context.Context) {
	tick := time.NewTicker(lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if ids := r.unacked(); len(ids) > 0 {
				r.modack(ctx, ids, lease)
			}
		}
	}
}

// nackHeld gives every dead letter held and not acked back to the
// subscription, to be read again at once.
func (r *reader) nackHeld(ctx context.Context) {
	ids := r.unacked()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	r.modack(ctx, ids, 0)
	r.mu.Lock()
	r.held = map[string]*heldLetter{}
	r.mu.Unlock()
}
