package providertest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

func ExampleSimulator() {
	// A strict provider allowing 2 messages per sliding second, on a clock
	// that does not move, so the third message is over the rate.
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sim := providertest.NewGeneric(providertest.Config{Token: "sim-token", Limit: 2, Window: time.Second},
		providertest.WithClock(func() time.Time { return now }))
	srv := httptest.NewServer(sim)
	defer srv.Close()

	c, err := provider.NewClient(srv.URL, "sim-token")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()
	for i := range 3 {
		_, err := c.Send(context.Background(), provider.Message{ID: fmt.Sprint("m", i), To: "+819012345678", Body: "hi"})
		fmt.Println(err)
	}
	st := sim.Stats()
	fmt.Println("accepted", st.Accepted, "throttled", st.Throttled, "max in a window", st.MaxInWindow)
	// Output:
	// <nil>
	// <nil>
	// provider: status 429 (retry after 1s): {"error":"rate limited"}
	// accepted 2 throttled 1 max in a window 2
}

func ExampleSimulator_receipts() {
	// A receiver standing in for the dispatcher's receipts endpoint.
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- string(body)
	}))
	defer receiver.Close()

	// Every message to +62 is undelivered; the others are delivered. The
	// receipts are posted at once rather than after 100 to 300 ms.
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sim := providertest.NewGeneric(providertest.Config{Receipts: providertest.ReceiptConfig{
		Secret:     "receipt-secret",
		MaxLatency: -1,
		Delivered:  []providertest.Delivery{{Prefix: "+62", Share: 0, ErrorCode: "filtered"}},
	}}, providertest.WithClock(func() time.Time { return now }))
	defer sim.Close() // stops posting receipts
	srv := httptest.NewServer(sim)
	defer srv.Close()

	client := &http.Client{}
	defer client.CloseIdleConnections()
	for _, to := range []string{"+819012345678", "+6281234567890"} {
		send := fmt.Sprintf(`{"to":%q,"body":"hi","client_ref":"m%s","status_callback":%q}`,
			to, to[1:3], receiver.URL+"/v1/receipts/acct")
		resp, err := client.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(send))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(<-got)
	}
	if err := sim.WaitReceipts(context.Background()); err != nil {
		fmt.Println(err)
	}
	st := sim.ReceiptStats()
	fmt.Println("delivered", st.ByStatus["delivered"], "undelivered", st.ByStatus["undelivered"])
	// Output:
	// {"id":"msg-00000001","client_ref":"m81","status":"delivered","error_code":"","timestamp":"2026-11-29T12:00:00.000Z"}
	// {"id":"msg-00000002","client_ref":"m62","status":"undelivered","error_code":"filtered","timestamp":"2026-11-29T12:00:00.000Z"}
	// delivered 1 undelivered 1
}
