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
	goleak.VerifyTestMain(m)
}
