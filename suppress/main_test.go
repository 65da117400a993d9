package suppress

import (
	"testing"

	"go.uber.org/goleak"
)

// The Pub/Sub client (TopicMirror), linked into this test, starts
// OpenCensus's worker at init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
