package topology

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
)

// TestAStalledStreamsPingDoesNotHoldTheEmulator: a marketing stream whose
// client reads no more (a lane holding its read-ahead) has pstest's sender
// blocked in gRPC's flow control; the client's keep-alive ping on it would
// make pstest wait for that sender while it holds its one lock, and no OTP
// could be published or pulled until the lane read on. Through NewClient
// the ping does not reach the emulator: an OTP published after it is
// pulled. The ping of a stream the client waits on still goes, and is
// answered.
func TestAStalledStreamsPingDoesNotHoldTheEmulator(t *testing.T) {
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	// A fixed stream window (no BDP growth), so that a small backlog fills it.
	c, err := NewClient(ctx, "proj", srv.Addr, option.WithGRPCDialOption(grpc.WithInitialWindowSize(64<<10)),
		option.WithGRPCDialOption(grpc.WithInitialConnWindowSize(64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, name := range []string{"mkt", "otp"} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/proj/topics/" + name}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: SubscriptionName("proj", name+"-sub"), Topic: "projects/proj/topics/" + name, AckDeadlineSeconds: 60}); err != nil {
			t.Fatal(err)
		}
	}
	const backlog = 200 // of 4 KiB: 800 KiB, far over the stream's window
	body := []byte(strings.Repeat("x", 4<<10))
	for range backlog {
		srv.Publish("projects/proj/topics/mkt", body, nil)
	}

	// The marketing stream: opened, then read no more.
	sctx, cancel := context.WithCancel(ctx)
	mkt, err := c.SubscriptionAdminClient.StreamingPull(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := mkt.Send(&pubsubpb.StreamingPullRequest{Subscription: SubscriptionName("proj", "mkt-sub"),
		StreamAckDeadlineSeconds: 60, ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := mkt.Recv(); err != nil {
		t.Fatal(err)
	}
	pub := c.Publisher("otp")
	t.Cleanup(pub.Stop) // after the stream is read: a publish the emulator holds ends then
	waitStalled(t, srv, backlog)
	t.Cleanup(func() {
		// Read the stream until the ping's answer (an empty response: the
		// emulator's lock is free again) or the backlog's end, then close
		// it, so that the server can stop.
		defer cancel()
		for n := 1; n < backlog; {
			r, err := mkt.Recv()
			if err != nil || len(r.GetReceivedMessages()) == 0 {
				return
			}
			n += len(r.GetReceivedMessages())
		}
	})
	if err := mkt.Send(&pubsubpb.StreamingPullRequest{}); err != nil { // the client's keep-alive ping
		t.Fatal(err)
	}

	// An OTP, published and pulled through the same emulator.
	tctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if _, err := pub.Publish(tctx, &pubsub.Message{Data: []byte("Your code is 482913")}).Get(tctx); err != nil {
		t.Fatalf("publish an OTP while the marketing stream is stalled: %v (the emulator is held by the ping)", err)
	}
	got := false
	rctx, done := context.WithCancel(tctx)
	err = c.Subscriber("otp-sub").Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		got = true
		done()
	})
	if err != nil || !got {
		t.Fatalf("pull the OTP while the marketing stream is stalled: got it %v, %v", got, err)
	}

	// An idle stream the client waits on: its ping is answered (an empty
	// response). The ping may go before the receive has begun to wait,
	// and be kept back: ping until one is answered.
	idle, err := c.SubscriptionAdminClient.StreamingPull(tctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Send(&pubsubpb.StreamingPullRequest{Subscription: SubscriptionName("proj", "otp-sub"),
		StreamAckDeadlineSeconds: 60, ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		r, err := idle.Recv()
		if err == nil && len(r.GetReceivedMessages()) > 0 {
			err = fmt.Errorf("a message on the idle stream: %v", r.GetReceivedMessages())
		}
		answered <- err
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("the idle stream's ping: %v", err)
			}
			waiting = false
		case <-tick.C:
			if err := idle.Send(&pubsubpb.StreamingPullRequest{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitStalled waits until pstest has stopped handing out srv's messages,
// fewer than all of them: the stream's sender is blocked in gRPC's flow
// control. No progress over 20 looks 10 ms apart counts as stopped (pstest
// delivers every 10 ms while it can).
func waitStalled(t *testing.T, srv *pstest.Server, total int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last, same := -1, 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-tick.C {
		n := 0
		for _, m := range srv.Messages() {
			if m.Deliveries > 0 {
				n++
			}
		}
		if n == total {
			t.Fatalf("all %d messages delivered: the stream's window did not fill", total)
		}
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		if same == 20 {
			return
		}
	}
	t.Fatal(fmt.Sprintf("pstest still delivering after 10s (%d delivered)", last))
}
