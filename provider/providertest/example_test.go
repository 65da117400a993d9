package providertest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
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
