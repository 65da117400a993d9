package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(soakSenderEnv); ok { // a soak test started this binary as a sender
		os.Exit(soakSenderMain(spec))
	}
	// The recorder (record.go) links the Pub/Sub client, whose OpenCensus
	// dependency starts a worker goroutine at init that never ends.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
