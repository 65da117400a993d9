package operator

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/receipts"
)

// DropEvents publishes the final status event of each deferred message
// an operator drops (deferral.Events): status dropped, reason operator,
// on STATUS_TOPIC, so that its producer learns its end. Each publish is
// waited for; a failure is kept for Err (the drop stands: the store, not
// the event, decides). `dispatcher deferred drop` and the console's lists
// page both drop through it.
type DropEvents struct {
	Publisher *pubsub.Publisher

	mu     sync.Mutex
	failed int
	err    error // the last failure
}

// DropReason is a drop's reason in its status event.
const DropReason = "operator"

// dropEvent is receipts.StatusEvent with the drop's reason.
type dropEvent struct {
	receipts.StatusEvent
	Reason string `json:"reason"`
}

// Event publishes id's status event.
func (d *DropEvents) Event(ctx context.Context, class, id, status string, _ time.Time) {
	data, _ := json.Marshal(dropEvent{StatusEvent: receipts.StatusEvent{ID: id, Status: status, Class: class,
		StatusAt: time.Now().UTC().Format(receipts.TimeLayout)}, Reason: DropReason}) // strings only: it cannot fail
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res := d.Publisher.Publish(ctx, &pubsub.Message{Data: data, Attributes: map[string]string{
		receipts.AttrID: id, receipts.AttrClass: class, receipts.AttrStatus: status, "reason": DropReason}})
	if _, err := res.Get(ctx); err != nil {
		d.mu.Lock()
		d.failed, d.err = d.failed+1, err
		d.mu.Unlock()
	}
}

// Err is how many events were not published, and the last failure.
func (d *DropEvents) Err() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed, d.err
}
