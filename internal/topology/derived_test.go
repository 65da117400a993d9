package topology_test

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config"
	"smsdispatcher/internal/topology"
)

// TestSetupCreatesTheListsTopics: the topology setup derives from the
// default configuration (config's Topology, as `dispatcher setup` runs
// it) creates SUPPRESSIONS_TOPIC (sms-suppressions) with its
// subscription sms-suppressions-inspect and INBOUND_TOPIC (sms-inbound)
// with sms-inbound-inspect, each subscription on its topic, and finds
// them on a second run.
func TestSetupCreatesTheListsTopics(t *testing.T) {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	load := config.Flags(fs, config.Pubsub|config.Topics|config.Subscriptions|config.DeadLetters|config.Waits,
		func(k string) string { return map[string]string{"PUBSUB_PROJECT_ID": "proj"}[k] })
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	c, err := topology.NewClient(ctx, "proj", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	want := map[string]string{"sms-suppressions-inspect": "sms-suppressions", "sms-inbound-inspect": "sms-inbound"}
	for _, state := range []string{"created", "exists"} {
		var report []string
		if err := topology.Setup(ctx, c, cfg.Topology(), func(kind, name, st string) { report = append(report, kind+" "+name+" "+st) }); err != nil {
			t.Fatal(err)
		}
		for sub, topic := range want {
			for _, line := range []string{"topic " + topic + " " + state, "subscription " + sub + " " + state} {
				if !strings.Contains(strings.Join(report, "\n")+"\n", line+"\n") {
					t.Fatalf("setup reported\n%s\nwant a line %q", strings.Join(report, "\n"), line)
				}
			}
		}
	}
	for sub, topic := range want {
		s, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: topology.SubscriptionName("proj", sub)})
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		if s.GetTopic() != "projects/proj/topics/"+topic {
			t.Errorf("%s is on %s, want %s", sub, s.GetTopic(), topic)
		}
	}
}
