package topology

import (
	"context"
	"sync/atomic"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
)

// streamingPull is the gRPC method of the pull streams.
const streamingPull = "/google.pubsub.v1.Subscriber/StreamingPull"

// emulatorPings keeps the client's keep-alive ping of a pull stream off
// the wire to an emulator while the client is not reading that stream.
// pstest answers a ping by handing the answer to the stream's sender while
// it holds its one lock, the lock of every subscription, publish and ack.
// A stream the client reads no more (a lane holding its read-ahead while
// the emulator streams a whole backlog at it, dispatch's lanes) has that
// sender blocked in gRPC's flow control, so the answer waits until the
// lane has handled enough to reopen the stream's window: seconds at
// marketing's rate, every 30 s, with no OTP delivered, acked or published
// meanwhile (docs/measurements.md, "An emulator's stalls"). Pub/Sub
// itself honours the flow control and locks nothing across subscriptions;
// gcloud's emulator does not stall so either, and loses nothing here.
//
// While a receive waits on the stream nothing of it is buffered and its
// window is open: the ping goes, and its answer keeps an idle stream open
// (the client closes a stream whose ping has no answer within 15 s). A
// stream the client reads slowly stays open on the messages it reads. A
// ping in the instant a receive takes what was buffered still goes: rare,
// and then the stall is as before. A ping that carries a new stream ack
// deadline always goes.
func emulatorPings() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != streamingPull {
			return cs, err
		}
		return &pingGate{ClientStream: cs}, nil
	})
}

// pingGate is a pull stream that sends its keep-alive pings only while
// the client is reading it.
type pingGate struct {
	grpc.ClientStream
	reading atomic.Int32 // RecvMsg calls in progress
}

func (s *pingGate) RecvMsg(m any) error {
	s.reading.Add(1)
	defer s.reading.Add(-1)
	return s.ClientStream.RecvMsg(m)
}

func (s *pingGate) SendMsg(m any) error {
	if r, ok := m.(*pubsubpb.StreamingPullRequest); ok && isKeepAlive(r) && s.reading.Load() == 0 {
		return nil
	}
	return s.ClientStream.SendMsg(m)
}

// isKeepAlive reports whether r is only the client's keep-alive ping: not
// the stream's first request, no acks, no lease changes, no new deadline.
func isKeepAlive(r *pubsubpb.StreamingPullRequest) bool {
	return r.GetSubscription() == "" && len(r.GetAckIds()) == 0 && len(r.GetModifyDeadlineAckIds()) == 0 &&
		r.GetStreamAckDeadlineSeconds() == 0
}
