package suppress

import (
	"context"
	"errors"
	"sync"

	"cloud.google.com/go/pubsub/v2"
)

// Attributes of a change on the mirror's topic.
const (
	AttrAction = "action"
	AttrSource = "source"
)

// TopicMirror publishes every change to a Pub/Sub topic
// (SUPPRESSIONS_TOPIC) as MirrorJSON, with attributes action and source.
// Mirror does not wait; Wait waits for what was published with its
// context's batch (Batch), or, without one, for what was published
// without one since the last Wait. It is safe for concurrent use: each
// request that must answer for its own publishes (an inbound STOP, a
// provider's opt-out, a console's change) takes a batch of its own, so
// that it never takes another's failure, nor another its.
type TopicMirror struct {
	Publisher *pubsub.Publisher

	mu      sync.Mutex
	pending []*pubsub.PublishResult // guarded by mu
}

// batchKey is the context key of a request's batch.
type batchKey struct{}

// batch is one request's publishes.
type batch struct {
	mu      sync.Mutex
	pending []*pubsub.PublishResult
}

// Batch returns ctx with a batch of its own: Wait(ctx), or a context
// derived from it, waits for the changes Mirror was given with it.
func Batch(ctx context.Context) context.Context {
	return context.WithValue(ctx, batchKey{}, &batch{})
}

// Mirror publishes e, in ctx's batch if it has one.
func (m *TopicMirror) Mirror(ctx context.Context, e Entry) {
	r := m.Publisher.Publish(context.Background(), &pubsub.Message{
		Data: MirrorJSON(e), Attributes: map[string]string{AttrAction: e.Action, AttrSource: e.Source},
	})
	if b, ok := ctx.Value(batchKey{}).(*batch); ok {
		b.mu.Lock()
		b.pending = append(b.pending, r)
		b.mu.Unlock()
		return
	}
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.mu.Unlock()
}

// Wait waits for Pub/Sub's answer to every change of ctx's batch not yet
// waited for (without a batch: every change published without one since
// the last Wait), and returns the errors among them.
func (m *TopicMirror) Wait(ctx context.Context) error {
	mu, pending := &m.mu, &m.pending
	if b, ok := ctx.Value(batchKey{}).(*batch); ok {
		mu, pending = &b.mu, &b.pending
	}
	mu.Lock()
	rs := *pending
	*pending = nil
	mu.Unlock()
	var errs []error
	for _, r := range rs {
		if _, err := r.Get(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
