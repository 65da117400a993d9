package console

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The Pub/Sub client, linked through config, starts OpenCensus's worker at init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
