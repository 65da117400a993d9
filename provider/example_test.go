package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"smsdispatcher/provider"
)

func ExampleClient_Send() {
	// A provider that accepts the first message and throttles the next.
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls++
		if calls > 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	c, err := provider.NewClient(srv.URL, "secret-token")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()

	for _, id := range []string{"login-1", "login-2"} {
		_, err := c.Send(context.Background(), provider.Message{ID: id, To: "+819012345678", Body: "Your code is 482913"})
		var pe *provider.Error
		switch {
		case err == nil:
			fmt.Println(id, "accepted")
		case errors.As(err, &pe) && pe.Throttled():
			fmt.Println(id, "throttled: stop sending for", pe.RetryAfter)
		case errors.As(err, &pe) && pe.Permanent():
			fmt.Println(id, "refused for good:", pe.Status)
		default:
			fmt.Println(id, "transient:", err)
		}
	}
	// Output:
	// login-1 accepted
	// login-2 throttled: stop sending for 2s
}

func ExampleSimulator() {
	// A strict provider allowing 2 messages per sliding second, on a clock
	// that does not move, so the third message is over the rate.
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sim := provider.NewSimulator(provider.SimConfig{Token: "sim-token", Limit: 2, Window: time.Second},
		provider.WithSimClock(func() time.Time { return now }))
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
