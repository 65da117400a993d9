package loadharness

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(SoakSenderEnv); ok { // a soak test started this binary as a sender
		os.Exit(SoakSender(spec))
	}
	goleak.VerifyTestMain(m)
}
