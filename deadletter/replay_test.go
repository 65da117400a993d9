package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/admission"
	"smsdispatcher/deadletter"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/ledger"
)

const project = "proj"

// letters is pstest with a dead-letter topic, its inspect subscription and
// the OTP topic replays go to, and send-once records in the test Redis
// under an account of its own.
type letters struct {
	t      *testing.T
	ps     *pstest.Server
	client *pubsub.Client
	claims *admission.Claims
}

func newLetters(t *testing.T) *letters {
	t.Helper()
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	client, err := topology.NewClient(context.Background(), project, ps.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	for _, topic := range []string{"dead", "otp"} {
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: topology.SubscriptionName(project, "inspect"), Topic: "projects/" + project + "/topics/dead", AckDeadlineSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	claims := admission.NewClaims(redistest.Client(t), redistest.UniqueAccount(t), 0, 0, 2*time.Second, nil)
	return &letters{t: t, ps: ps, client: client, claims: claims}
}

// add publishes an OTP dead letter of id as the dispatcher does, and
// returns its message ID.
func (h *letters) add(id string) string {
	h.t.Helper()
	return h.addTo(id, "+819012345678")
}

// addTo is add of a message to the number to.
func (h *letters) addTo(id, to string) string {
	h.t.Helper()
	pub := h.client.Publisher("dead")
	defer pub.Stop()
	data := fmt.Sprintf(`{"id":%q,"to":%q,"body":"hi"}`, id, to)
	attrs := map[string]string{attr.Class: "otp", attr.RejectReason: "provider: status 400"}
	mid, err := pub.Publish(context.Background(), &pubsub.Message{Data: []byte(data), Attributes: attrs}).Get(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return mid
}

// acks is how many acks the dead letter of message ID mid got.
func (h *letters) acks(mid string) int { return h.ps.Message(mid).Acks }

// republished is the number of messages published to the OTP topic.
func (h *letters) republished() int {
	n := 0
	for _, m := range h.ps.Messages() {
		if m.Topic == "projects/"+project+"/topics/otp" {
			n++
		}
	}
	return n
}

func (h *letters) inspect() deadletter.Inspect {
	return deadletter.Inspect{Subscription: "inspect", Wait: 700 * time.Millisecond}
}

// replay runs Replay with records and returns its results.
func (h *letters) replay(records deadletter.Records, afterRepublish func(int)) ([]deadletter.Result, deadletter.Summary) {
	h.t.Helper()
	return h.replayBy(func(admission.Class, string) deadletter.Records { return records }, afterRepublish)
}

// replayBy is replay with the records of each class and destination.
func (h *letters) replayBy(records func(admission.Class, string) deadletter.Records, afterRepublish func(int)) ([]deadletter.Result, deadletter.Summary) {
	h.t.Helper()
	opts := deadletter.ReplayOptions{
		Inspect: h.inspect(),
		Topics:  map[admission.Class]string{admission.OTP: "otp"},
		Records: func(_ context.Context, class admission.Class, to string) (deadletter.Records, error) {
			return records(class, to), nil
		},
		Decode: decode, WithID: withID,
		MaxReplays: 3, AfterRepublish: afterRepublish,
	}
	var got []deadletter.Result
	sum, err := deadletter.Replay(context.Background(), h.client, opts, func(r deadletter.Result) { got = append(got, r) })
	if err != nil {
		h.t.Fatalf("Replay: %v", err)
	}
	return got, sum
}

func decode(data []byte, standInID string) (id, to string, err error) {
	m, err := dispatch.Decode(data, standInID)
	return m.ID, m.To, err
}

func withID(data []byte, id string) []byte { return dispatch.WithID(data, id, time.Time{}) }

// TestReplayDecidesByTheRecord: a sent id is acked and never republished;
// a refused one is republished, its record cleared, and acked only after
// the republish; an id whose record is of a form replay does not know is
// left listed, and says what the record says.
func TestReplayDecidesByTheRecord(t *testing.T) {
	h := newLetters(t)
	ctx := context.Background()
	sent, refused, unknown := h.add("sent-1"), h.add("refused-1"), h.add("unknown-1")
	if err := h.claims.Finish(ctx, "sent-1", ledger.RecordSent); err != nil {
		t.Fatal(err)
	}
	if err := h.claims.Refuse(ctx, "refused-1", "provider: status 400"); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Client(t).Set(ctx, h.claims.Key("unknown-1"), "archived", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	ackedBefore := -1
	got, sum := h.replay(h.claims, func(int) { ackedBefore = h.acks(refused) })

	byID := map[string]deadletter.Result{}
	for _, r := range got {
		byID[r.ID] = r
	}
	if r := byID["sent-1"]; r.Action != deadletter.Skipped || r.Reason != deadletter.SkipSent || h.acks(sent) == 0 {
		t.Errorf("sent id: %+v, acks %d; want skipped sent and acked", r, h.acks(sent))
	}
	if r := byID["refused-1"]; r.Action != deadletter.Replayed || h.acks(refused) == 0 {
		t.Errorf("refused id: %+v, acks %d; want replayed and acked", r, h.acks(refused))
	}
	if ackedBefore != 0 {
		t.Errorf("refused id acked %d times before its republish was confirmed, want 0", ackedBefore)
	}
	if rec, err := h.claims.Recorded(ctx, "refused-1"); err != nil || rec.State != ledger.Unrecorded {
		t.Errorf("refused id's record after replay: %v, %v; want cleared", rec, err)
	}
	want := deadletter.Result{ID: "unknown-1", Class: "otp", Action: deadletter.Skipped, Reason: deadletter.SkipUnknownRecord,
		Detail: `its send-once record says "archived": left listed`}
	if r := byID["unknown-1"]; r != want || h.acks(unknown) != 0 {
		t.Errorf("unknown record: %+v, acks %d; want %+v, not acked", r, h.acks(unknown), want)
	}
	if h.republished() != 1 || sum.Replayed != 1 || sum.Failed != 0 {
		t.Errorf("republished %d, summary %+v; want the refused id alone", h.republished(), sum)
	}
}

// TestReplayFindsTheRecordByDestination: with two accounts split by
// destination, each id's record is read and cleared on the home of its
// class and number, the routing table's first account, and never on the
// other.
func TestReplayFindsTheRecordByDestination(t *testing.T) {
	h := newLetters(t)
	ctx := context.Background()
	world := admission.NewClaims(redistest.Client(t), redistest.UniqueAccount(t), 0, 0, 2*time.Second, nil)
	jp := h.claims
	table := dispatch.NewTable([][]admission.Class{{admission.OTP}, {admission.OTP}}, [][]string{{"+81"}, nil}, dispatch.RouteLongestPrefix)
	homes := []*admission.Claims{jp, world}
	h.addTo("jp-1", "+819012345678")
	h.addTo("us-1", "+14155550100")
	for _, r := range []struct {
		claims *admission.Claims
		id     string
	}{{jp, "jp-1"}, {world, "us-1"}} {
		if err := r.claims.Refuse(ctx, r.id, "provider: status 400"); err != nil {
			t.Fatal(err)
		}
	}
	// The other account's record of each id says sent: read there, the
	// replay would skip it.
	if err := world.Finish(ctx, "jp-1", ledger.RecordSent); err != nil {
		t.Fatal(err)
	}
	if err := jp.Finish(ctx, "us-1", ledger.RecordSent); err != nil {
		t.Fatal(err)
	}
	got, sum := h.replayBy(func(class admission.Class, to string) deadletter.Records {
		return homes[table.Route(class, to)[0]]
	}, nil)
	if sum.Replayed != 2 || h.republished() != 2 {
		t.Fatalf("results %+v, summary %+v; want both replayed", got, sum)
	}
	for _, r := range []struct {
		claims *admission.Claims
		id     string
		want   ledger.ClaimState
	}{{jp, "jp-1", ledger.Unrecorded}, {world, "us-1", ledger.Unrecorded}, {world, "jp-1", ledger.Finished}, {jp, "us-1", ledger.Finished}} {
		if rec, err := r.claims.Recorded(ctx, r.id); err != nil || rec.State != r.want {
			t.Errorf("%s's record: %v, %v; want state %v", r.id, rec, err, r.want)
		}
	}
}

// badReply answers as Claims does when forget.lua's reply has the wrong
// shape.
type badReply struct{}

func (badReply) Forget(context.Context, string) (ledger.Record, bool, error) {
	return ledger.Record{}, false, fmt.Errorf("%w: forget.lua answered [x]", admission.ErrBadReply)
}

func (badReply) Recorded(context.Context, string) (ledger.Record, error) {
	return ledger.Record{}, errors.New("not called")
}

var _ deadletter.Records = badReply{}

// TestReplayFailsOnABadReply: a reply of the wrong shape is a failure (run
// replay again), not an unknown record.
func TestReplayFailsOnABadReply(t *testing.T) {
	h := newLetters(t)
	mid := h.add("bad-1")
	got, sum := h.replay(badReply{}, nil)
	if len(got) != 1 || got[0].Action != deadletter.Failed || sum.Failed != 1 || h.acks(mid) != 0 || h.republished() != 0 {
		t.Fatalf("results %+v, summary %+v; want one failure, nothing acked or republished", got, sum)
	}
}

// TestListConsumesNothing: listing twice shows the same dead letters, none
// acked.
func TestListConsumesNothing(t *testing.T) {
	h := newLetters(t)
	mids := []string{h.add("a"), h.add("b")}
	for i := range 2 {
		ls, err := deadletter.List(context.Background(), h.client, h.inspect(), deadletter.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Letters) != 2 || ls.Read != 2 {
			t.Fatalf("list %d: %d of %d read; want 2 of 2", i+1, len(ls.Letters), ls.Read)
		}
	}
	for _, mid := range mids {
		if n := h.acks(mid); n != 0 {
			t.Errorf("%s acked %d times by list", mid, n)
		}
	}
}

// TestReplayGoesToItsClassesTopic: a dead letter goes back to the topic
// of the class its class attribute names, any configured class; one of a
// class that is not configured is left listed, with why.
func TestReplayGoesToItsClassesTopic(t *testing.T) {
	h := newLetters(t)
	ctx := context.Background()
	if _, err := h.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/tx"}); err != nil {
		t.Fatal(err)
	}
	pub := h.client.Publisher("dead")
	for id, class := range map[string]string{"cart-1": "transactional", "old-1": "cart"} {
		attrs := map[string]string{attr.Class: class, attr.RejectReason: "provider: status 400"}
		data := fmt.Sprintf(`{"id":%q,"to":"+819012345678","body":"hi"}`, id)
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(data), Attributes: attrs}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pub.Stop()
	opts := deadletter.ReplayOptions{
		Inspect: h.inspect(),
		Topics:  map[admission.Class]string{admission.OTP: "otp", "transactional": "tx"},
		Records: func(context.Context, admission.Class, string) (deadletter.Records, error) { return h.claims, nil },
		Decode:  decode, WithID: withID, MaxReplays: 3,
	}
	got := map[string]deadletter.Result{}
	if _, err := deadletter.Replay(ctx, h.client, opts, func(r deadletter.Result) { got[r.ID] = r }); err != nil {
		t.Fatal(err)
	}
	if r := got["cart-1"]; r.Action != deadletter.Replayed || r.Class != "transactional" {
		t.Errorf("transactional dead letter: %v, want replayed", r)
	}
	if r := got["old-1"]; r.Action != deadletter.Skipped || r.Reason != deadletter.SkipUnknownClass {
		t.Errorf("dead letter of a class not configured: %v, want skipped as %s", r, deadletter.SkipUnknownClass)
	}
	var topics []string
	for _, m := range h.ps.Messages() {
		if m.Topic != "projects/"+project+"/topics/dead" {
			topics = append(topics, m.Topic)
		}
	}
	if len(topics) != 1 || topics[0] != "projects/"+project+"/topics/tx" {
		t.Errorf("republished to %v, want the transactional topic once", topics)
	}
}
