package receipts

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"smsdispatcher/provider"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// pstestTopics returns publishers of the named topics on a new pstest
// server, and the server.
func pstestTopics(t *testing.T, topics ...string) (*pstest.Server, []TopicPublisher) {
	t.Helper()
	return pstestTopicsWith(t, nil, topics...)
}

// pstestTopicsWith is pstestTopics on a server with reactors opts.
func pstestTopicsWith(t *testing.T, opts []pstest.ServerReactorOption, topics ...string) (*pstest.Server, []TopicPublisher) {
	t.Helper()
	ps := pstest.NewServer(opts...)
	t.Cleanup(func() { ps.Close() })
	c, err := pubsub.NewClient(context.Background(), "test", option.WithEndpoint(ps.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var pubs []TopicPublisher
	for _, name := range topics {
		if _, err := c.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: "projects/test/topics/" + name}); err != nil {
			t.Fatal(err)
		}
		p := c.Publisher(name)
		p.PublishSettings.DelayThreshold = time.Millisecond
		t.Cleanup(p.Stop)
		pubs = append(pubs, TopicPublisher{Publisher: p})
	}
	return ps, pubs
}

// TestStatusEventAndResendOnPubSub posts an undelivered receipt to a
// server publishing to pstest: the resend and then the status event are
// on their topics, with their data and attributes exactly.
func TestStatusEventAndResendOnPubSub(t *testing.T) {
	ps, pubs := pstestTopics(t, "sms-status", "sms-otp")
	ledger := newTestLedger()
	sentAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	// The report's time is the event's status_at.
	reader := readerAt{&testReader{secret: "s3cret"}, sentAt.Add(2250 * time.Millisecond)}
	srv, err := New(Config{
		PublicURL: testPublicURL + "/",
		Accounts:  []Account{{Name: "acct", Reader: reader, Ledger: ledger}},
		Status:    pubs[0], Resend: pubs[1], Deadline: payloadDeadline,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.now = func() time.Time { return sentAt.Add(3 * time.Second) } // within the resend's window
	ledger.add("m1", "SM1", "otp", sentAt, []byte(`{"id":"m1","to":"+6281234567890","body":"code 1234"}`))
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	body := "SM1 undelivered 30007"
	req, _ := http.NewRequest("POST", hs.URL+"/v1/receipts/acct", strings.NewReader(body))
	req.Header.Set("X-Test-Signature", testSign("s3cret", testPublicURL+"/v1/receipts/acct", []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d", resp.StatusCode)
	}

	msgs := ps.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages published, want 2", len(msgs))
	}
	resend, event := msgs[0], msgs[1]
	if resend.Topic != "projects/test/topics/sms-otp" || string(resend.Data) != `{"id":"m1","to":"+6281234567890","body":"code 1234"}` ||
		!maps.Equal(resend.Attributes, map[string]string{"sms-resend-avoid": "acct", "sms-resend-reason": "undelivered 30007"}) {
		t.Errorf("first published on %s: %s %v, want the resend", resend.Topic, resend.Data, resend.Attributes)
	}
	wantData := `{"id":"m1","status":"undelivered","error_code":"30007","provider_id":"SM1","account":"acct","class":"otp",` +
		`"sent_at":"2026-01-02T02:04:05.000Z","status_at":"2026-01-02T02:04:07.250Z"}`
	if event.Topic != "projects/test/topics/sms-status" || string(event.Data) != wantData {
		t.Errorf("status event on %s:\n%s\nwant\n%s", event.Topic, event.Data, wantData)
	}
	if want := map[string]string{"id": "m1", "class": "otp", "status": "undelivered"}; !maps.Equal(event.Attributes, want) {
		t.Errorf("status event attributes %v, want %v", event.Attributes, want)
	}
}

// readerAt is a reader whose reports say the status happened at at.
type readerAt struct {
	r  *testReader
	at time.Time
}

func (r readerAt) ReadReceipt(req provider.ReceiptRequest) (provider.DeliveryReport, error) {
	dr, err := r.r.ReadReceipt(req)
	dr.At = r.at
	return dr, err
}

// TestTopicPublisherReturnsPubSubsAnswer publishes to a topic that does
// not exist: the error comes back, so the event stays owed.
func TestTopicPublisherReturnsPubSubsAnswer(t *testing.T) {
	ps, pubs := pstestTopics(t, "sms-status")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pubs[0].Publish(ctx, []byte("x"), map[string]string{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if m := ps.Messages(); len(m) != 1 || string(m[0].Data) != "x" || m[0].Attributes["a"] != "b" {
		t.Fatalf("published %+v", m)
	}
	c, err := pubsub.NewClient(ctx, "test", option.WithEndpoint(ps.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	missing := c.Publisher("sms-missing")
	defer missing.Stop()
	if err := (TopicPublisher{Publisher: missing}).Publish(ctx, []byte("x"), nil); err == nil {
		t.Fatal("publishing to a missing topic: no error")
	}
}
