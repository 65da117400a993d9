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
// Mirror does not wait; Wait waits for what was published since the last
// Wait. It is safe for concurrent use.
type TopicMirror struct {
	Publisher *pubsub.Publisher

	mu      sync.Mutex
	pending []*pubsub.PublishResult // guarded by mu
}

// Mirror publishes e.
func (m *TopicMirror) Mirror(e Entry) {
	r := m.Publisher.Publish(context.Background(), &pubsub.Message{
		Data: MirrorJSON(e), Attributes: map[string]string{AttrAction: e.Action, AttrSource: e.Source},
	})
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.mu.Unlock()
}

// Wait waits for Pub/Sub's answer to every change published since the
// last Wait, and returns the errors among them.
func (m *TopicMirror) Wait(ctx context.Context) error {
	m.mu.Lock()
	pending := m.pending
	m.pending = nil
	m.mu.Unlock()
	var errs []error
	for _, r := range pending {
		if _, err := r.Get(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
