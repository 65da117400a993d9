package main

import (
	"bytes"
	"context"
	"errors"
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
