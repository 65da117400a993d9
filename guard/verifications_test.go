package guard

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/config/policy"
	"smsdispatcher/internal/redistest"
)

// heard records the classes Listen counts verifications in.
type heard struct {
	mu      sync.Mutex
	classes []string
}

func (h *heard) Verification(class string) {
	h.mu.Lock()
	h.classes = append(h.classes, class)
	h.mu.Unlock()
}

func (h *heard) first() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.classes) == 0 {
		return "", false
	}
	return h.classes[0], true
}

// A verification published the moment its code is sent comes while the
// send is still in the counter's linger: it is asked again, and counts.
func TestAVerificationAheadOfItsCountCounts(t *testing.T) {
	ctx := context.Background()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ps, err := pubsub.NewClient(ctx, "test", option.WithEndpoint(srv.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/test/topics/v"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/test/subscriptions/v", Topic: "projects/test/topics/v", AckDeadlineSeconds: 10}); err != nil {
		t.Fatal(err)
	}

	rules := &policy.Guard{MinConversion: policy.Conversion{Ratio: 0.2, MinSends: 10, Digits: 5, Per: time.Minute, Grace: time.Second, BlockFor: time.Minute}}
	class := redistest.UniqueAccount(t)
	g := New(redistest.Client(t), map[string]*policy.Guard{class: rules}, "p1", Options{Linger: 300 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	counts := &heard{}
	wg.Go(func() { g.Run(rctx) })
	wg.Go(func() { g.Listen(rctx, ps.Subscriber("v"), counts) })
	defer func() { cancel(); wg.Wait() }()

	id := class + "-v1"
	g.Sent(class, id, "+447010012345")
	data, _ := json.Marshal(Verification{ID: id})
	pub := ps.Publisher("v")
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: data}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, ok := counts.first(); ok {
			if c != class {
				t.Fatalf("the verification counted in %q, want %q: ignored as unknown", c, class)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the verification not counted after 10 s")
		}
	}
}
