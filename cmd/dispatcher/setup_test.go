package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config"
	"smsdispatcher/internal/topology"
)

// TestSetupDeadLetterRetention: the dead-letter subscription, which holds
// numbers and bodies, keeps them for --dead-letter-retention (7 days by
// default); a shorter one given later reaches the existing subscription,
// and the dispatcher's own subscriptions keep their 7 days.
func TestSetupDeadLetterRetention(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	ctx := context.Background()
	retention := func(sub string) time.Duration {
		t.Helper()
		c, err := topology.NewClient(ctx, "proj", "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: "projects/proj/subscriptions/" + sub})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetMessageRetentionDuration().AsDuration()
	}
	setup := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, append([]string{"setup"}, args...), &out, io.Discard); err != nil {
			t.Fatalf("setup %v: %v", args, err)
		}
		return out.String()
	}

	setup()
	if got := retention("sms-dead-letter-inspect"); got != 7*24*time.Hour {
		t.Fatalf("default dead-letter retention %v, want 168h", got)
	}
	out := setup("--dead-letter-retention", "24h")
	if !strings.Contains(out, "sms-dead-letter-inspect") || !strings.Contains(out, "updated retention 24h0m0s") {
		t.Fatalf("setup --dead-letter-retention 24h printed %q: want the subscription's retention updated", out)
	}
	if got := retention("sms-dead-letter-inspect"); got != 24*time.Hour {
		t.Fatalf("dead-letter retention %v after setup --dead-letter-retention 24h", got)
	}
	if got := retention("sms-otp-dispatcher"); got != 7*24*time.Hour {
		t.Fatalf("the OTP subscription's retention changed to %v", got)
	}
	if out := setup("--dead-letter-retention", "24h"); strings.Contains(out, "updated") {
		t.Fatalf("setup again with the same retention printed %q: want nothing updated", out)
	}

	for _, bad := range []string{"5m", "200h", "a week"} {
		err := run(ctx, []string{"setup", "--dead-letter-retention", bad}, io.Discard, io.Discard)
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Env != "DEAD_LETTER_RETENTION" {
			t.Errorf("--dead-letter-retention %s: %v, want a configuration error naming DEAD_LETTER_RETENTION", bad, err)
		}
	}
}

// TestSetupCreatesTheStatusTopic: setup creates STATUS_TOPIC (sms-status
// by default) and its subscription sms-status-inspect on it, once.
func TestSetupCreatesTheStatusTopic(t *testing.T) {
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	ctx := context.Background()
	for _, tt := range []struct{ topic, args string }{{"sms-status", ""}, {"sms-status-2", "--status-topic sms-status-2"}} {
		ps := pstest.NewServer()
		defer ps.Close()
		t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
		for _, want := range []string{"created", "exists"} {
			var out bytes.Buffer
			if err := run(ctx, append([]string{"setup"}, strings.Fields(tt.args)...), &out, io.Discard); err != nil {
				t.Fatalf("setup %s: %v", tt.args, err)
			}
			for _, line := range []string{fmt.Sprintf("%-12s %-28s %s", "topic", tt.topic, want), fmt.Sprintf("%-12s %-28s %s", "subscription", "sms-status-inspect", want)} {
				if !strings.Contains(out.String(), line) {
					t.Fatalf("setup %s printed:\n%s\nwant a line %q", tt.args, out.String(), line)
				}
			}
		}
		c, err := topology.NewClient(ctx, "proj", "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: "projects/proj/subscriptions/sms-status-inspect"})
		if err != nil {
			t.Fatal(err)
		}
		if s.GetTopic() != "projects/proj/topics/"+tt.topic {
			t.Fatalf("sms-status-inspect is on %s, want %s", s.GetTopic(), tt.topic)
		}
	}
}

// TestSetupAndPublishOfConfiguredClasses: with ACCOUNTS_FILE's three
// classes, setup creates each class's topic and subscription, publish
// --class sends to the class's topic, and a class not configured is
// refused with the classes there are.
func TestSetupAndPublishOfConfiguredClasses(t *testing.T) {
	ps := pstest.NewServer()
	defer ps.Close()
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	t.Setenv("PUBSUB_PROJECT_ID", "proj")
	t.Setenv("ACCOUNTS_FILE", writeFile(t, "accounts.yaml", "classes:\n  - {name: otp}\n  - {name: transactional, max_wait: 4s}\n  - {name: marketing}\n"+
		"accounts:\n  - {name: main, provider: generic, generic: {url: https://a.example, token: t}, classes: [otp, transactional, marketing]}\n"))
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"setup"}, &out, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	for _, line := range []string{
		fmt.Sprintf("%-12s %-28s %s", "topic", "sms-transactional", "created"),
		fmt.Sprintf("%-12s %-28s %s", "subscription", "sms-transactional-dispatcher", "created"),
		fmt.Sprintf("%-12s %-28s %s", "subscription", "sms-otp-dispatcher", "created"),
		fmt.Sprintf("%-12s %-28s %s", "subscription", "sms-marketing-dispatcher", "created"),
	} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("setup printed:\n%s\nwant a line %q", out.String(), line)
		}
	}
	if err := run(ctx, []string{"publish", "--class", "transactional", "--to", "+819012345678", "--body", "your cart"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("publish --class transactional: %v", err)
	}
	var topics []string
	for _, m := range ps.Messages() {
		topics = append(topics, m.Topic)
	}
	if len(topics) != 1 || topics[0] != "projects/proj/topics/sms-transactional" {
		t.Fatalf("published to %v, want sms-transactional", topics)
	}
	err := run(ctx, []string{"publish", "--class", "cart", "--to", "+819012345678", "--body", "x"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "want one of the classes otp, transactional, marketing") {
		t.Fatalf("publish --class cart: %v, want the configured classes", err)
	}
}
