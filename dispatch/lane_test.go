package dispatch

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
)

// heldDLQ is a DeadLetterer that holds each dead letter until release is
// closed, and tells arrived of each one: the bytes of the messages it
// holds are what the lane has in hand.
type heldDLQ struct {
	arrived chan int // the bytes in hand once a message arrived
	release chan struct{}
	mu      sync.Mutex
	inHand  int // guarded by mu
}

var _ DeadLetterer = (*heldDLQ)(nil)

func (q *heldDLQ) DeadLetter(ctx context.Context, m *pubsub.Message, _ admission.Class, _ string) error {
	q.mu.Lock()
	q.inHand += len(m.Data)
	n := q.inHand
	q.mu.Unlock()
	q.arrived <- n
	<-q.release
	q.mu.Lock()
	q.inHand -= len(m.Data)
	q.mu.Unlock()
	return nil
}

// blockedInFlowControl reports whether a goroutine waits in the Pub/Sub
// client's flow control for room to hand a message over.
func blockedInFlowControl() bool {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(g, []byte("\n"))
		if bytes.Contains(head, []byte("[select")) && bytes.Contains(g, []byte("pubsub/v2.(*flowController).acquire")) {
			return true
		}
	}
	return false
}

// TestALaneHoldsAtMostItsOutstandingOfValidMessagesInBytes: a lane of 2
// outstanding holds at most 2 × 64 KiB of data. Two messages of 100 KiB
// (too large to send: dead-lettered) are handed over one at a time: the
// second waits in the client's flow control while the first is held, and
// comes once it is let go. Under the client's default byte cap (1e9) both
// would be in hand at once, and a lane of a few hundred such messages of
// Pub/Sub's 10 MB each would outgrow a pod's memory.
func TestALaneHoldsAtMostItsOutstandingOfValidMessagesInBytes(t *testing.T) {
	const size, outstanding = 100 << 10, 2
	ctx := context.Background()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	c, err := pubsub.NewClient(ctx, project, option.WithEndpoint(srv.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, name := range []string{"sms-otp", "sms-marketing"} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/test/topics/" + name}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/test/subscriptions/" + name, Topic: "projects/test/topics/" + name, AckDeadlineSeconds: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	pub := c.Publisher("sms-otp")
	t.Cleanup(pub.Stop)
	for range 2 {
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: bytes.Repeat([]byte("a"), size)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}

	dlq := &heldDLQ{arrived: make(chan int, 2), release: make(chan struct{})}
	d, err := New(Config{OTPOutstanding: outstanding, MarketingOutstanding: outstanding}, Deps{
		OTP: c.Subscriber("sms-otp"), Marketing: c.Subscriber("sms-marketing"),
		Limiter: &fakeLimiter{}, Claims: &fakeClaims{}, Sender: &fakeSender{}, DeadLetter: dlq,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(rctx) }()
	released := false
	defer func() {
		if !released {
			close(dlq.release)
		}
		stop()
		<-done
	}()

	hang := time.NewTimer(30 * time.Second) // a bound on a hang, not a speed claim
	defer hang.Stop()
	select {
	case <-dlq.arrived:
	case <-hang.C:
		t.Fatal("the first message never reached its dead letter")
	}
	// Now either the second message comes while the first is held (no
	// byte cap), or the client holds it back for want of room.
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !blockedInFlowControl() {
		select {
		case n := <-dlq.arrived:
			t.Fatalf("the lane holds %d bytes of data at once, over its cap of %d (%d outstanding × %d)", n, outstanding*MaxDataBytes, outstanding, MaxDataBytes)
		case <-poll.C:
		case <-hang.C:
			t.Fatal("the second message neither came nor waited in the client's flow control")
		}
	}
	close(dlq.release)
	released = true
	select {
	case n := <-dlq.arrived:
		if n != size {
			t.Fatalf("%d bytes in hand once the first was let go, want the second's %d", n, size)
		}
	case <-hang.C:
		t.Fatal("the second message did not come once the first was let go")
	}
}
