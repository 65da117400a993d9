package localstack

import (
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/internal/topology"
)

// nackDelayReactor makes pstest hold a nacked message of a subscription in
// delays (by ID, in project) for its delay before redelivering it, as
// Pub/Sub does with a subscription's RetryPolicy.
func nackDelayReactor(project string, delays map[string]time.Duration) pstest.ServerReactorOption {
	n := nackDelay{}
	for sub, d := range delays {
		n[topology.SubscriptionName(project, sub)] = int32(d / time.Second)
	}
	return pstest.ServerReactorOption{FuncName: "ModifyAckDeadline", Reactor: n}
}

// nackDelay is the delay in seconds of each subscription, by its full name.
type nackDelay map[string]int32

// React turns a nack (a new ack deadline of 0) into a deadline of the
// subscription's minimum backoff, then lets pstest handle the request.
// It runs under pstest's lock: it must not call the server.
func (n nackDelay) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.ModifyAckDeadlineRequest); ok && r.AckDeadlineSeconds == 0 {
		r.AckDeadlineSeconds = n[r.Subscription]
	}
	return false, nil, nil
}
