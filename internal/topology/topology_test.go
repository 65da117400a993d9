package topology

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
)

// TestSetupThenCheck: Setup creates every resource once, then says they
// exist; the subscriptions get the ack deadline and dead-letter limit the
// dispatcher needs; CheckSubscriptions passes them and names the index
// of one that is missing.
func TestSetupThenCheck(t *testing.T) {
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	c, err := NewClient(ctx, "proj", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	top := Topology{OTPTopic: "otp", MarketingTopic: "mkt", DeadLetterTopic: "dl",
		OTPSubscription: "otp-sub", MarketingSubscription: "mkt-sub", DeadLetterInspect: "dl-inspect",
		DeadLetterRetention: 24 * time.Hour, MaxWait: 30 * time.Second, SendTimeout: 10 * time.Second}
	for _, want := range []string{"created", "exists"} {
		var states []string
		if err := Setup(ctx, c, top, func(kind, name, state string) { states = append(states, kind+" "+name+" "+state) }); err != nil {
			t.Fatal(err)
		}
		if len(states) != 6 || strings.Count(strings.Join(states, "\n"), " "+want) != 6 {
			t.Fatalf("setup reported %q, want 6 resources %s", states, want)
		}
	}
	sub, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: SubscriptionName("proj", "mkt-sub")})
	if err != nil {
		t.Fatal(err)
	}
	if sub.AckDeadlineSeconds != 50 || sub.GetDeadLetterPolicy().GetMaxDeliveryAttempts() != MaxDeliveryAttempts ||
		sub.GetRetryPolicy().GetMinimumBackoff().AsDuration() != MinimumBackoff("marketing") {
		t.Errorf("marketing subscription %v: want an ack deadline of 50 s, %d attempts, its class's backoff", sub, MaxDeliveryAttempts)
	}

	if err := CheckSubscriptions(ctx, c, []string{"otp-sub", "mkt-sub"}, 5*time.Second); err != nil {
		t.Fatalf("check: %v", err)
	}
	err = CheckSubscriptions(ctx, c, []string{"otp-sub", "typo"}, 5*time.Second)
	var se *SubscriptionError
	if !errors.As(err, &se) || se.Index != 1 || !strings.Contains(se.Error(), `subscription "typo" of project "proj" not found`) {
		t.Fatalf("check of a missing subscription: %v, want a SubscriptionError of index 1", err)
	}
}

// TestSetupCreatesEveryLane: with three lanes, Setup creates each topic
// and subscription, the first with the first class's retry policy and
// the others with the later classes'.
func TestSetupCreatesEveryLane(t *testing.T) {
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	c, err := NewClient(ctx, "proj", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	top := Topology{Lanes: []Lane{{"sms-otp", "otp-sub", true}, {"sms-transactional", "tx-sub", false}, {"sms-marketing", "mkt-sub", false}},
		OTPTopic: "unused", DeadLetterTopic: "dl", DeadLetterInspect: "dl-inspect",
		DeadLetterRetention: 24 * time.Hour, MaxWait: 8 * time.Second, SendTimeout: 10 * time.Second}
	var created []string
	if err := Setup(ctx, c, top, func(kind, name, state string) { created = append(created, kind+" "+name) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"topic sms-otp", "topic sms-transactional", "topic sms-marketing", "topic dl",
		"subscription dl-inspect", "subscription otp-sub", "subscription tx-sub", "subscription mkt-sub"}
	if strings.Join(created, ", ") != strings.Join(want, ", ") {
		t.Fatalf("created %q, want %q", created, want)
	}
	for i, id := range []string{"otp-sub", "tx-sub", "mkt-sub"} {
		sub, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: SubscriptionName("proj", id)})
		if err != nil {
			t.Fatal(err)
		}
		backoff := sub.GetRetryPolicy().GetMinimumBackoff().AsDuration()
		if backoff != LaneBackoff(i == 0) || sub.GetDeadLetterPolicy().GetMaxDeliveryAttempts() != MaxDeliveryAttempts || !strings.HasSuffix(sub.Topic, "/"+top.Lanes[i].Topic) {
			t.Errorf("subscription %s: backoff %v, topic %s, dead letter %v; want %v, %s, %d attempts", id, backoff, sub.Topic, sub.GetDeadLetterPolicy(), LaneBackoff(i == 0), top.Lanes[i].Topic, MaxDeliveryAttempts)
		}
	}
	if LaneBackoff(true) != MinimumBackoff("otp") || LaneBackoff(false) != MinimumBackoff("marketing") || LaneBackoff(true) == LaneBackoff(false) {
		t.Errorf("backoffs: first %v, later %v; otp %v, marketing %v", LaneBackoff(true), LaneBackoff(false), MinimumBackoff("otp"), MinimumBackoff("marketing"))
	}
}
