package topology

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"smsdispatcher/config/policy"
)

// Topology is what Setup creates: the topics and subscriptions (ids in
// the client's project) and what their settings derive from.
type Topology struct {
	// Lanes are the classes' topics and subscriptions in priority order;
	// empty: OTPTopic and OTPSubscription, then MarketingTopic and
	// MarketingSubscription.
	Lanes                                     []Lane
	OTPTopic, MarketingTopic, DeadLetterTopic string
	OTPSubscription, MarketingSubscription    string
	// DeadLetterInspect is the subscription on DeadLetterTopic that
	// operators read; it keeps messages for DeadLetterRetention.
	DeadLetterInspect   string
	DeadLetterRetention time.Duration
	// StatusTopic is the topic of the messages' final delivery states and
	// StatusInspect its subscription that people and tests read; "": none.
	StatusTopic, StatusInspect string
	// Inspected are topics the dispatcher publishes to for the
	// application (the suppression list's changes, the inbound replies),
	// each with the subscription people and tests read.
	Inspected []Inspected
	// VerificationsTopic is where applications say which OTPs' codes were
	// used, and VerificationsSubscription the dispatcher's on it; "":
	// none.
	VerificationsTopic, VerificationsSubscription string
	// MaxWait is the longer of the classes' max waits and SendTimeout a
	// send's: the subscriptions' ack deadline is longer than both.
	MaxWait, SendTimeout time.Duration
	// WithoutDeadLetterPolicy leaves the dispatcher subscriptions without
	// a dead-letter policy: pstest's dead-letter forwarding republishes
	// forever, and the dispatcher dead-letters explicitly anyway.
	WithoutDeadLetterPolicy bool
}

// Inspected is a topic and its subscription for reading.
type Inspected struct{ Topic, Inspect string }

// A Lane is one class's topic, which producers publish it to, and the
// dispatcher's subscription on it.
type Lane struct {
	Topic, Subscription string
	// RetriedSoon: the class's policy has its nacked messages redelivered
	// soon (policy.Class.RetriedSoon, the first class's).
	RetriedSoon bool
}

// lanes are t's lanes: Lanes, or the OTP one then the marketing one, with
// the default classes' policies.
func (t Topology) lanes() []Lane {
	if len(t.Lanes) > 0 {
		return t.Lanes
	}
	return []Lane{
		{t.OTPTopic, t.OTPSubscription, policy.Default(policy.OTP).RetriedSoon},
		{t.MarketingTopic, t.MarketingSubscription, policy.Default("marketing").RetriedSoon},
	}
}

// Redelivery backoff of nacked messages, by the class's policy (the
// subscription's RetryPolicy: the one place a nack is delayed): a class
// retried soon (the first) has a short one, as OTP's; every other class
// marketing's.
var (
	soonRetry  = &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(time.Second), MaximumBackoff: durationpb.New(10 * time.Second)}
	laterRetry = &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(5 * time.Second), MaximumBackoff: durationpb.New(60 * time.Second)}
)

// retryPolicy is the retry policy of a subscription whose class is
// retried soon, or not.
func retryPolicy(soon bool) *pubsubpb.RetryPolicy {
	if soon {
		return soonRetry
	}
	return laterRetry
}

// MinimumBackoff is how long Pub/Sub holds a nacked message of class
// before it delivers it again, at least, with the default classes
// (policy.Default): otp has the first class's backoff, any other name a
// later class's.
func MinimumBackoff(class string) time.Duration {
	return LaneBackoff(policy.Default(class).RetriedSoon)
}

// LaneBackoff is MinimumBackoff of a class retried soon, or not.
func LaneBackoff(soon bool) time.Duration {
	return retryPolicy(soon).MinimumBackoff.AsDuration()
}

// retention keeps unacked messages (a campaign backlog, or everything while
// the provider suspends the account) for Pub/Sub's maximum of 7 days.
var retention = durationpb.New(7 * 24 * time.Hour)

// ackDeadline is the subscriptions' ack deadline: longer than a message can
// be held (the longer max wait plus a send), so that Pub/Sub does not
// redeliver a message a pod is still working on before the client's lease
// extension has a chance; within Pub/Sub's 10-600 s.
func ackDeadline(maxWait, sendTimeout time.Duration) int32 {
	d := maxWait + sendTimeout + 10*time.Second
	return int32(min(max(d/time.Second, 10), 600))
}

// MaxDeliveryAttempts is the dead-letter policy's limit (Pub/Sub allows
// 5-100). The policy is what makes Pub/Sub count delivery attempts. serve
// gives the same number to dispatch.Config.MaxDeliveryAttempts, so that the
// dispatcher dead-letters a message itself, with a reject_reason, on the
// delivery after which the policy would forward it silently.
const MaxDeliveryAttempts = 100

// Setup creates what t names when it is missing: every class's topic, the
// dead-letter topic and its inspect subscription, the status topic and its
// inspect subscription, and every class's dispatcher subscription with a
// dead-letter policy (unless t.WithoutDeadLetterPolicy) and the retry
// policy of its position. An inspect subscription that exists gets
// t.DeadLetterRetention if it keeps messages for another time: it holds
// phone numbers and bodies, and a shorter retention must reach it. It is
// idempotent. report is told of each resource and what was done: created,
// exists or updated.
func Setup(ctx context.Context, c *pubsub.Client, t Topology, report func(kind, name, state string)) error {
	topic := func(id string) string { return fmt.Sprintf("projects/%s/topics/%s", c.Project(), id) }
	sub := func(id string) string { return SubscriptionName(c.Project(), id) }

	lanes := t.lanes()
	var topics []string
	for _, l := range lanes {
		topics = append(topics, l.Topic)
	}
	topics = append(topics, t.DeadLetterTopic)
	if t.StatusTopic != "" {
		topics = append(topics, t.StatusTopic)
	}
	for _, in := range t.Inspected {
		topics = append(topics, in.Topic)
	}
	if t.VerificationsTopic != "" {
		topics = append(topics, t.VerificationsTopic)
	}
	for _, id := range topics {
		_, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic(id)})
		if created, err := existsOK(err); err != nil {
			return fmt.Errorf("create topic %s: %w", id, err)
		} else {
			report("topic", id, createdState(created))
		}
	}
	deadline := ackDeadline(t.MaxWait, t.SendTimeout)
	subs := []*pubsubpb.Subscription{
		{Name: sub(t.DeadLetterInspect), Topic: topic(t.DeadLetterTopic), AckDeadlineSeconds: 60,
			MessageRetentionDuration: durationpb.New(t.DeadLetterRetention)},
	}
	for _, l := range lanes {
		subs = append(subs, &pubsubpb.Subscription{Name: sub(l.Subscription), Topic: topic(l.Topic), AckDeadlineSeconds: deadline,
			MessageRetentionDuration: retention,
			RetryPolicy:              retryPolicy(l.RetriedSoon),
			DeadLetterPolicy:         &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topic(t.DeadLetterTopic), MaxDeliveryAttempts: MaxDeliveryAttempts}})
	}
	if t.StatusTopic != "" && t.StatusInspect != "" {
		subs = append(subs, &pubsubpb.Subscription{Name: sub(t.StatusInspect), Topic: topic(t.StatusTopic), AckDeadlineSeconds: 60,
			MessageRetentionDuration: retention})
	}
	for _, in := range t.Inspected {
		subs = append(subs, &pubsubpb.Subscription{Name: sub(in.Inspect), Topic: topic(in.Topic), AckDeadlineSeconds: 60,
			MessageRetentionDuration: retention})
	}
	if t.VerificationsTopic != "" && t.VerificationsSubscription != "" {
		subs = append(subs, &pubsubpb.Subscription{Name: sub(t.VerificationsSubscription), Topic: topic(t.VerificationsTopic), AckDeadlineSeconds: 60,
			MessageRetentionDuration: retention})
	}
	for _, s := range subs {
		if t.WithoutDeadLetterPolicy {
			s.DeadLetterPolicy = nil
		}
		_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, s)
		created, err := existsOK(err)
		if err != nil {
			return fmt.Errorf("create subscription %s: %w", s.Name, err)
		}
		state := createdState(created)
		if !created && s.Name == sub(t.DeadLetterInspect) {
			if state, err = keepRetention(ctx, c, s); err != nil {
				return err
			}
		}
		report("subscription", s.Name[len(sub("")):], state)
	}
	return nil
}

func createdState(created bool) string {
	if created {
		return "created"
	}
	return "exists"
}

// keepRetention gives the existing subscription want's message retention
// if it has another: "updated", else "exists".
func keepRetention(ctx context.Context, c *pubsub.Client, want *pubsubpb.Subscription) (string, error) {
	got, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: want.Name})
	if err != nil {
		return "", fmt.Errorf("read subscription %s: %w", want.Name, err)
	}
	if got.GetMessageRetentionDuration().AsDuration() == want.MessageRetentionDuration.AsDuration() {
		return "exists", nil
	}
	_, err = c.SubscriptionAdminClient.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
		Subscription: &pubsubpb.Subscription{Name: want.Name, MessageRetentionDuration: want.MessageRetentionDuration},
		UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"message_retention_duration"}},
	})
	if err != nil {
		return "", fmt.Errorf("update the retention of subscription %s: %w", want.Name, err)
	}
	return "updated retention " + want.MessageRetentionDuration.AsDuration().String(), nil
}

// existsOK turns AlreadyExists into success: created reports whether the
// call made the resource.
func existsOK(err error) (created bool, _ error) {
	if err == nil {
		return true, nil
	}
	if status.Code(err) == codes.AlreadyExists {
		return false, nil
	}
	return false, err
}
