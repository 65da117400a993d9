package pullwatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
)

// Silence is how long a subscription's pull streams may go without an
// answer from Pub/Sub before the pod is unready and says so in its log.
// The client pings an idle stream every 30 s and Pub/Sub answers each
// ping, so a healthy stream is never silent that long (Watch.silence
// does not count a ping whose answer may still come); a variable for the
// tests.
var Silence = 30 * time.Second

// logEvery is how often a silent subscription is logged, at most.
const logEvery = time.Minute

// streamingPull is the gRPC method of the pull streams.
const streamingPull = "/google.pubsub.v1.Subscriber/StreamingPull"

// Watch watches the pull streams of the subscriptions it was given, as
// a gRPC stream interceptor on the Pub/Sub client: when each stream opened
// or failed to, what it sent Pub/Sub (the client's pings) and when Pub/Sub
// answered (messages, or the empty answer to a ping). pubsub.Subscriber
// shows none of this, and its Receive retries an unreachable Pub/Sub for
// ever without returning. A Watch is safe for concurrent use.
type Watch struct {
	started time.Time                         // a subscription with no stream yet is silent from here
	onError func(admission.Class, codes.Code) // counts a failed stream (sms_pull_errors_total); may be nil

	mu   sync.Mutex
	subs map[string]*subWatch // by the subscription's full name; guarded by mu, as is every subWatch
}

// subWatch is what is known of one subscription's streams.
type subWatch struct {
	class   admission.Class
	answer  time.Time                   // Pub/Sub's last answer on any stream
	open    map[*watchedStream]struct{} // streams opened and not ended
	failing bool                        // the last stream ended with no answer, or with a ping unanswered: an open stream proves nothing until Pub/Sub answers
	parked  bool                        // the last stream was ended by this side, nothing unanswered, and none is open: the lane holds (an account pause)
	lastErr error                       // the last stream's error, for the log
	errors  int                         // streams failed since the last log line
	logged  time.Time                   // the last log line
}

// watchedStream is one open stream; guarded by Watch.mu.
type watchedStream struct {
	answered bool      // Pub/Sub answered on it
	owed     time.Time // the first ping Pub/Sub has not answered yet; zero if none
}

// New returns a watch, started at now, of the subscriptions (full
// names) in classes.
func New(now time.Time, classes map[string]admission.Class, onError func(admission.Class, codes.Code)) *Watch {
	w := &Watch{started: now, onError: onError, subs: map[string]*subWatch{}}
	for name, class := range classes {
		w.subs[name] = &subWatch{class: class, answer: now, open: map[*watchedStream]struct{}{}}
	}
	return w
}

// DialOption installs the watch on a gRPC client.
func (w *Watch) DialOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(w.intercept)
}

func (w *Watch) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method != streamingPull {
		return streamer(ctx, desc, cc, method, opts...)
	}
	name := subscriptionOf(ctx)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		w.ended(time.Now(), name, nil, err)
		return nil, err
	}
	s := &watchedStream{}
	w.mu.Lock()
	if sw := w.subs[name]; sw != nil {
		sw.open[s] = struct{}{}
		sw.parked = false
	}
	w.mu.Unlock()
	return &watchingStream{ClientStream: cs, w: w, name: name, s: s}, nil
}

// subscriptionOf reads the subscription of a pull stream from its routing
// header, which pubsub sets on every stream it opens.
func subscriptionOf(ctx context.Context) string {
	md, _ := metadata.FromOutgoingContext(ctx)
	for _, v := range md.Get("x-goog-request-params") {
		if q, err := url.ParseQuery(v); err == nil && q.Get("subscription") != "" {
			return q.Get("subscription")
		}
	}
	return ""
}

// watchingStream is a pull stream that tells its watch what goes through.
type watchingStream struct {
	grpc.ClientStream
	w    *Watch
	name string
	s    *watchedStream
	once sync.Once
}

func (c *watchingStream) SendMsg(m any) error {
	if r, ok := m.(*pubsubpb.StreamingPullRequest); ok && isPing(r) {
		c.w.sent(time.Now(), c.name, c.s)
	}
	return c.ClientStream.SendMsg(m)
}

func (c *watchingStream) RecvMsg(m any) error {
	err := c.ClientStream.RecvMsg(m)
	if err != nil {
		c.once.Do(func() { c.w.ended(time.Now(), c.name, c.s, err) })
		return err
	}
	c.w.answered(time.Now(), c.name, c.s)
	return nil
}

// isPing reports whether r is the client's keep-alive ping, which Pub/Sub
// answers: neither the stream's first request nor acks nor lease changes.
func isPing(r *pubsubpb.StreamingPullRequest) bool {
	return r.GetSubscription() == "" && len(r.GetAckIds()) == 0 && len(r.GetModifyDeadlineAckIds()) == 0
}

func (w *Watch) sent(now time.Time, name string, s *watchedStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs[name] != nil && s.owed.IsZero() {
		s.owed = now
	}
}

func (w *Watch) answered(now time.Time, name string, s *watchedStream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sw := w.subs[name]; sw != nil {
		sw.answer, sw.failing = now, false
		s.answered, s.owed = true, time.Time{}
	}
}

// ended records the end of stream s (nil: it never opened) with err. A
// stream ended by this side (Canceled: the lane stopping or pausing) or
// closed cleanly (EOF: the client closes a stream whose ping went
// unanswered) is not counted an error. One that never opened, ended in an
// error before any answer, or ended with a ping unanswered makes the
// subscription's next streams prove themselves.
func (w *Watch) ended(now time.Time, name string, s *watchedStream, err error) {
	code := status.Code(err)
	if errors.Is(err, io.EOF) {
		code = codes.OK
	}
	w.mu.Lock()
	sw := w.subs[name]
	if sw == nil {
		w.mu.Unlock()
		return
	}
	if s != nil {
		delete(sw.open, s)
	}
	counted := code != codes.OK && code != codes.Canceled
	if s == nil || (counted && !s.answered) || !s.owed.IsZero() {
		sw.failing = true
	}
	sw.parked = !sw.failing && !counted && len(sw.open) == 0
	if counted {
		sw.lastErr, sw.errors = err, sw.errors+1
	}
	class := sw.class
	w.mu.Unlock()
	if counted && w.onError != nil {
		w.onError(class, code)
	}
}

// silence returns since when the subscription name has had no answer from
// Pub/Sub that counts at now: its last answer, or now while a stream is
// open with nothing unanswered (a fresh or idle stream, whose pings are
// answered) or while the lane holds its pulls (its last stream ended by
// this side with nothing unanswered), or the first ping still unanswered
// (less than Silence old is a ping whose answer may still come). Streams that open after one
// failed count only once Pub/Sub answers on one: a server that takes
// streams and never answers opens them again and again.
func (w *Watch) silence(name string, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	sw := w.subs[name]
	if sw == nil {
		return 0
	}
	if sw.parked {
		return 0
	}
	alive := sw.answer
	if !sw.failing {
		for s := range sw.open {
			t := now
			if !s.owed.IsZero() {
				t = s.owed
			}
			if t.After(alive) {
				alive = t
			}
		}
	}
	return now.Sub(alive)
}

// Silent reports whether the subscription name has been without an answer
// for Silence or more.
func (w *Watch) Silent(name string, now time.Time) (time.Duration, bool) {
	d := w.silence(name, now)
	return d, d >= Silence
}

// report is one silent subscription's log line.
type report struct {
	name    string
	silent  time.Duration
	errors  int   // streams that failed since the last line
	lastErr error // nil if none failed
}

// due returns the subscriptions silent at now that were last logged
// logEvery ago or more, and counts them logged at now.
func (w *Watch) due(now time.Time) []report {
	var out []report
	for name := range w.subs { // the set of names is fixed at New
		d, silent := w.Silent(name, now)
		if !silent {
			continue
		}
		w.mu.Lock()
		sw := w.subs[name]
		if sw.logged.IsZero() || now.Sub(sw.logged) >= logEvery {
			out = append(out, report{name: name, silent: d, errors: sw.errors, lastErr: sw.lastErr})
			sw.logged, sw.errors = now, 0
		}
		w.mu.Unlock()
	}
	return out
}

// Run logs, every second until ctx ends, each subscription silent for
// Silence, once a minute at most: the pod is unready and not pulling,
// and says why.
func (w *Watch) Run(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, r := range w.due(now) {
				attrs := []any{"subscription", r.name, "silent_for", r.silent.Round(time.Second), "failed_streams", r.errors}
				if r.lastErr != nil {
					attrs = append(attrs, "code", status.Code(r.lastErr).String(), "err", r.lastErr)
				}
				logger.Error("no answer from Pub/Sub on the subscription: not pulling, unready", attrs...)
			}
		}
	}
}
