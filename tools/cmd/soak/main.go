// Command soak runs the real limiter at full rate for a long time and fails
// on a leak: K (23) sender processes, each this command started again as a
// sender (package tools/internal/loadharness, SoakSenderEnv), on one account
// against one provider simulator, their heap, goroutines and sockets and
// Redis's memory and keys sampled every 10 s. It fails if any grows more
// than 10 % from minute 2 to the end, or if the provider answered any 429.
//
//	go -C tools run ./cmd/soak --soak 10m --soak-csv soak.csv
//
// The table goes to stdout, progress to stderr; the exit status is 1 when
// the soak fails, 2 for -h.
package main

import (
	"context"
	"io"
	"os"

	"smsdispatcher/internal/cli"
	"smsdispatcher/tools/internal/loadharness"
)

func main() {
	if spec, ok := os.LookupEnv(loadharness.SoakSenderEnv); ok {
		os.Exit(loadharness.SoakSender(spec))
	}
	cli.Main("soak", run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := loadharness.ParseSoak(args, stderr)
	if err != nil {
		return err
	}
	return loadharness.Soak(ctx, cfg, stdout, stderr)
}
