package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/receipts"
	"smsdispatcher/telemetry"
)

// newDeferral returns the deferral store and its releaser when a class
// has send windows or a cap (nil, nil otherwise), on the process's Redis,
// publishing releases to each such class's topic and the status events
// to STATUS_TOPIC; stop flushes those publishers.
func (s *Server) newDeferral(ps *pubsub.Client) (*deferral.Store, *deferral.Releaser, func()) {
	var lanes []deferral.Lane
	var pubs []*pubsub.Publisher
	for _, c := range s.cfg.ClassList() {
		if s.cfg.Policy(c.Name).Sending == (policy.Sending{}) {
			continue
		}
		p := ps.Publisher(c.Topic)
		pubs = append(pubs, p)
		lanes = append(lanes, deferral.Lane{Class: c.Name.String(), Publisher: p})
	}
	if len(lanes) == 0 {
		return nil, nil, func() {}
	}
	status := ps.Publisher(s.cfg.StatusTopic)
	pubs = append(pubs, status)
	store := deferral.New(s.rdb, nil, deferralEvents{publisher: status, logger: s.logger})
	if s.opts.Telemetry != nil {
		store.Expired = s.opts.Telemetry.Metrics.Expired
	}
	rel := &deferral.Releaser{Store: store, Lanes: lanes, Token: s.id, Logger: s.logger}
	return store, rel, func() {
		for _, p := range pubs {
			p.Stop()
		}
	}
}

// deferralEvents publishes the deferral's status events (deferred,
// capped, expired) to STATUS_TOPIC in the format of
// receipts.StatusEvent, as the receipts' events are. A publish is waited
// for a few seconds and its failure logged: the event tells, the store
// decides.
type deferralEvents struct {
	publisher *pubsub.Publisher
	logger    *slog.Logger
}

// Event publishes id's status event.
func (t deferralEvents) Event(ctx context.Context, class, id, status string, until time.Time) {
	ev := receipts.StatusEvent{ID: id, Status: status, Class: class, StatusAt: time.Now().UTC().Format(receipts.TimeLayout)}
	if !until.IsZero() {
		ev.Until = until.UTC().Format(time.RFC3339)
	}
	data, _ := json.Marshal(ev) // strings only: it cannot fail
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := t.publisher.Publish(ctx, &pubsub.Message{Data: data,
		Attributes: map[string]string{receipts.AttrID: id, receipts.AttrClass: class, receipts.AttrStatus: status}})
	if _, err := res.Get(ctx); err != nil {
		t.logger.Warn("a status event was not published", "id", id, "status", status, "err", err)
	}
}

// deferredState fills st's deferral gauges from the releaser's last read.
func (s *Server) deferredState(st *telemetry.State) {
	if s.releaser == nil {
		return
	}
	st.Deferred, st.Overdue = map[string]int{}, map[string]int{}
	for _, c := range s.releaser.Stats() {
		st.Deferred[c.Class], st.Overdue[c.Class] = c.Deferred, c.Overdue
	}
}
