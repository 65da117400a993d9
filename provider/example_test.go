package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

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
