package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"smsdispatcher/config"
)

// newPubsub returns a Pub/Sub client of project, with opts. With endpoint
// set it talks to that in-process server without credentials (local
// mode); otherwise the client's own rules apply, PUBSUB_EMULATOR_HOST
// included.
func newPubsub(ctx context.Context, project, endpoint string, opts ...option.ClientOption) (*pubsub.Client, error) {
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	c, err := pubsub.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	return c, nil
}

// subscriptionCheckTimeout bounds serve's start-up check of its
// subscriptions: a Pub/Sub that does not answer within it stops the
// process; a variable for the tests.
var subscriptionCheckTimeout = 10 * time.Second

// subscriptionName is a subscription's full name, as the start-up check,
// setup and the pull streams' routing header (the pull watch's keys) say
// it.
func subscriptionName(project, id string) string {
	return "projects/" + project + "/subscriptions/" + id
}

// checkSubscriptions returns nil if both subscriptions of cfg exist and
// this identity may pull them, else an error of one line naming the
// first that fails and the project: not found (a wrong project, or setup
// not run), not readable (a role missing), or Pub/Sub not answering
// within timeout (a wrong PUBSUB_EMULATOR_HOST, egress blocked, an
// outage). Reading a subscription takes pubsub.subscriptions.get, which
// roles/pubsub.subscriber lacks: refused that, it asks whether the
// identity may pull (pubsub.subscriptions.consume) instead.
func checkSubscriptions(ctx context.Context, c *pubsub.Client, cfg config.Settings, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range []struct{ env, flag, id string }{
		{"OTP_SUBSCRIPTION", "otp-subscription", cfg.OTPSubscription},
		{"MARKETING_SUBSCRIPTION", "marketing-subscription", cfg.MarketingSubscription},
	} {
		name := subscriptionName(c.Project(), s.id)
		_, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
		code := status.Code(err)
		if code == codes.PermissionDenied && mayConsume(ctx, c, name) {
			continue
		}
		what := fmt.Sprintf("subscription %q of project %q", s.id, c.Project())
		switch code {
		case codes.OK:
		case codes.NotFound:
			return &config.Error{Env: s.env, Flag: s.flag, Msg: what + " not found (a wrong PUBSUB_PROJECT_ID, or 'dispatcher setup' not run): " + config.OneLine(err.Error())}
		case codes.PermissionDenied, codes.Unauthenticated:
			return &config.Error{Env: s.env, Flag: s.flag, Msg: what + ": this identity may not pull it (roles/pubsub.subscriber on it, docs/operating.md): " + config.OneLine(err.Error())}
		default:
			return fmt.Errorf("pubsub: %s: no answer within %v (PUBSUB_EMULATOR_HOST, egress to pubsub.googleapis.com): %s", what, timeout, config.OneLine(err.Error()))
		}
	}
	return nil
}

// mayConsume reports whether this identity may pull subscription name.
func mayConsume(ctx context.Context, c *pubsub.Client, name string) bool {
	const consume = "pubsub.subscriptions.consume"
	r, err := c.SubscriptionAdminClient.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: name, Permissions: []string{consume}})
	return err == nil && slices.Contains(r.GetPermissions(), consume)
}

// Redelivery backoff of nacked messages, per class (the subscription's
// RetryPolicy: the one place a nack is delayed).
var retryPolicies = map[string]*pubsubpb.RetryPolicy{
	"otp":       {MinimumBackoff: durationpb.New(time.Second), MaximumBackoff: durationpb.New(10 * time.Second)},
	"marketing": {MinimumBackoff: durationpb.New(5 * time.Second), MaximumBackoff: durationpb.New(60 * time.Second)},
}

// retention keeps unacked messages (a campaign backlog, or everything while
// the provider suspends the account) for Pub/Sub's maximum of 7 days.
var retention = durationpb.New(7 * 24 * time.Hour)

// ackDeadline is the subscriptions' ack deadline: longer than a message can
// be held (the longer max wait plus a send), so that Pub/Sub does not
// redeliver a message a pod is still working on before the client's lease
// extension has a chance; within Pub/Sub's 10-600 s.
func ackDeadline(cfg config.Settings) int32 {
	d := max(cfg.OTPMaxWait, cfg.MarketingMaxWait) + cfg.SendTimeout + 10*time.Second
	return int32(min(max(d/time.Second, 10), 600))
}

// maxDeliveryAttempts is the dead-letter policy's limit (Pub/Sub allows
// 5-100). The policy is what makes Pub/Sub count delivery attempts. serve
// gives the same number to dispatch.Config.MaxDeliveryAttempts, so that the
// dispatcher dead-letters a message itself, with a reject_reason, on the
// delivery after which the policy would forward it silently.
const maxDeliveryAttempts = 100

// setupTopology creates what config names when it is missing: both topics,
// the dead-letter topic and its inspect subscription, and both dispatcher
// subscriptions with a dead-letter policy (unless local: pstest's
// dead-letter forwarding republishes forever, and the dispatcher
// dead-letters explicitly anyway). An inspect subscription that exists
// gets cfg.DeadLetterRetention if it keeps messages for another time: it
// holds phone numbers and bodies, and a shorter retention must reach it.
// It is idempotent. report is told of each resource and what was done:
// created, exists or updated.
func setupTopology(ctx context.Context, c *pubsub.Client, cfg config.Settings, local bool, report func(kind, name, state string)) error {
	topic := func(id string) string { return fmt.Sprintf("projects/%s/topics/%s", c.Project(), id) }
	sub := func(id string) string { return subscriptionName(c.Project(), id) }

	for _, id := range []string{cfg.OTPTopic, cfg.MarketingTopic, cfg.DeadLetterTopic} {
		_, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic(id)})
		if created, err := existsOK(err); err != nil {
			return fmt.Errorf("create topic %s: %w", id, err)
		} else {
			report("topic", id, createdState(created))
		}
	}
	subs := []*pubsubpb.Subscription{
		{Name: sub(cfg.DeadLetterInspect), Topic: topic(cfg.DeadLetterTopic), AckDeadlineSeconds: 60,
			MessageRetentionDuration: durationpb.New(cfg.DeadLetterRetention)},
		{Name: sub(cfg.OTPSubscription), Topic: topic(cfg.OTPTopic), AckDeadlineSeconds: ackDeadline(cfg),
			MessageRetentionDuration: retention,
			RetryPolicy:              retryPolicies["otp"],
			DeadLetterPolicy:         &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topic(cfg.DeadLetterTopic), MaxDeliveryAttempts: maxDeliveryAttempts}},
		{Name: sub(cfg.MarketingSubscription), Topic: topic(cfg.MarketingTopic), AckDeadlineSeconds: ackDeadline(cfg),
			MessageRetentionDuration: retention,
			RetryPolicy:              retryPolicies["marketing"],
			DeadLetterPolicy:         &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topic(cfg.DeadLetterTopic), MaxDeliveryAttempts: maxDeliveryAttempts}},
	}
	for _, s := range subs {
		if local {
			s.DeadLetterPolicy = nil
		}
		_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, s)
		created, err := existsOK(err)
		if err != nil {
			return fmt.Errorf("create subscription %s: %w", s.Name, err)
		}
		state := createdState(created)
		if !created && s.Name == sub(cfg.DeadLetterInspect) {
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

// publishAndWait publishes one message and waits for its server ID.
func publishAndWait(ctx context.Context, p *pubsub.Publisher, m *pubsub.Message) (string, error) {
	id, err := p.Publish(ctx, m).Get(ctx)
	if err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	return id, nil
}

var errNoProvider = errors.New("SMS_PROVIDER_URL is required to serve (try 'dispatcher demo' for a local run)")
