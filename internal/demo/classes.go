package demo

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/topology"
)

// Transactional is the class --classes 3 adds between otp and marketing.
const Transactional admission.Class = "transactional"

// DefaultTransactionalRate is Options.TransactionalRate's default.
const DefaultTransactionalRate = 10.0

// The transactional class's Pub/Sub names and max wait.
const (
	transactionalTopic        = "sms-transactional"
	transactionalSubscription = "sms-transactional-dispatcher"
	transactionalMaxWait      = 4 * time.Second
)

// threeClasses returns cfg with three classes in priority order: otp,
// transactional and marketing, the first and last on cfg's topics. The
// account serves the three; transactional's ceiling is a third of
// TARGET_RPS (at most MARKETING_RPS, all that otp's reserve leaves),
// marketing's MARKETING_RPS, and otp's reserve today's headroom,
// TARGET_RPS − MARKETING_RPS.
func threeClasses(cfg config.Settings) config.Settings {
	cfg.Lanes = []config.Class{
		{Name: admission.OTP, Topic: cfg.OTPTopic, Subscription: cfg.OTPSubscription, MaxWait: cfg.OTPMaxWait},
		{Name: Transactional, Topic: transactionalTopic, Subscription: transactionalSubscription, MaxWait: transactionalMaxWait},
		{Name: admission.Marketing, Topic: cfg.MarketingTopic, Subscription: cfg.MarketingSubscription, MaxWait: cfg.MarketingMaxWait},
	}
	cfg.Account.Classes = []admission.Class{admission.OTP, Transactional, admission.Marketing}
	cfg.ClassRPS = map[admission.Class]float64{Transactional: min(cfg.TargetRPS/3, cfg.MarketingRPS), admission.Marketing: cfg.MarketingRPS}
	cfg.ReserveRPS = map[admission.Class]float64{admission.OTP: cfg.TargetRPS - cfg.MarketingRPS}
	return cfg
}

// setupLanes creates the topic and subscription of each class of cfg
// that the dispatcher's topology (otp's and marketing's) leaves out,
// unless they exist: the subscription with the retry policy of a class
// after the first.
func setupLanes(ctx context.Context, admin *pubsub.Client, cfg config.Settings) error {
	for _, c := range cfg.ClassList() {
		if c.Topic == cfg.OTPTopic || c.Topic == cfg.MarketingTopic {
			continue
		}
		topic := fmt.Sprintf("projects/%s/topics/%s", cfg.ProjectID, c.Topic)
		if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); status.Code(err) != codes.AlreadyExists && err != nil {
			return fmt.Errorf("create topic %s: %w", c.Topic, err)
		}
		_, err := admin.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: topology.SubscriptionName(cfg.ProjectID, c.Subscription), Topic: topic,
			AckDeadlineSeconds: int32(min(600, (c.MaxWait+cfg.SendTimeout+10*time.Second)/time.Second)),
			RetryPolicy:        &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(topology.MinimumBackoff("marketing"))},
		})
		if status.Code(err) != codes.AlreadyExists && err != nil {
			return fmt.Errorf("create subscription %s: %w", c.Subscription, err)
		}
	}
	return nil
}

// retryClass names the retry policy of the class at position i: the
// first class's is OTP's, the others' marketing's.
func retryClass(i int) string {
	if i == 0 {
		return "otp"
	}
	return "marketing"
}
