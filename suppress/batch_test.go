package suppress

import (
	"context"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/internal/topology"
)

// TestAWaitTakesOnlyItsOwnBatch: requests that run at once each wait for
// their own publishes. A's change to a topic that does not exist fails;
// B, which published nothing, must not take A's failure (B would answer
// an error for nothing), and A must still get it (A would answer 200, and
// its change would never reach the topic: the provider does not retry).
func TestAWaitTakesOnlyItsOwnBatch(t *testing.T) {
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	client, err := topology.NewClient(context.Background(), "proj", ps.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	m := &TopicMirror{Publisher: client.Publisher("no-such-topic")}
	t.Cleanup(m.Publisher.Stop)

	a, b := Batch(context.Background()), Batch(context.Background())
	m.Mirror(a, Entry{Number: "+447700900123", Action: ActionAdd, Source: SourceInbound})
	if err := m.Wait(b); err != nil {
		t.Fatalf("B, which published nothing, took %v", err)
	}
	if err := m.Wait(a); err == nil {
		t.Fatal("A's failed publish was not A's to see: its change is lost")
	}
}
