package topology

import (
	"context"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
)

// streamingPull is the gRPC method of the pull streams.
const streamingPull = "/google.pubsub.v1.Subscriber/StreamingPull"

// emulatorPings keeps the client's keep-alive pings of its pull streams
// off the wire to an emulator. pstest answers a ping by handing the answer
// to the stream's sender while it holds its one lock, the lock of every
// subscription, publish and ack; a stream whose client reads no more (a
// lane that holds its read-ahead while the emulator streams a whole
// backlog at it, dispatch's lanes) has a sender blocked in gRPC's flow
// control, so that answer waits until the lane has handled enough to
// reopen the stream's window: seconds at marketing's rate, every 30 s,
// with no OTP delivered, acked or published meanwhile
// (docs/measurements.md, "An emulator's stalls"). Pub/Sub itself honours
// the flow control and locks nothing across subscriptions.
//
// Without its pings the client closes a stream that has had no message
// for 15 s after one and opens another: an idle lane's stream is renewed
// about every 30 s, which costs the emulator nothing. A ping that carries
// a new stream ack deadline is sent.
func emulatorPings() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != streamingPull {
			return cs, err
		}
		return pinglessStream{cs}, nil
	})
}

// pinglessStream is a pull stream that does not send its keep-alive pings.
type pinglessStream struct{ grpc.ClientStream }

func (s pinglessStream) SendMsg(m any) error {
	if r, ok := m.(*pubsubpb.StreamingPullRequest); ok && isKeepAlive(r) {
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
