package topology

import (
	"testing"

	"go.uber.org/goleak"
)

// The Pub/Sub client, linked into this test, starts OpenCensus's worker at
// init; a Receive that returned stops its keep-alive asynchronously.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"))
}
