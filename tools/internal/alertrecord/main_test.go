package alertrecord

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The recorder links the Pub/Sub client, whose OpenCensus dependency
	// starts a worker goroutine at init that never ends.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
