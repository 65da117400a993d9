package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	if spec, ok := os.LookupEnv(soakSenderEnv); ok {
		os.Exit(soakSenderMain(spec))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only maps its error to an exit status.
// The table goes to stdout, progress to stderr. With --soak it runs the
// soak instead of the matrix (soak.go), with --scenario its rows
// (scenario.go).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	redisOpts, stopRedis, err := redisFor(ctx, cfg.redisURL, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopRedis(); serr != nil && err == nil {
			err = serr
		}
	}()

	if cfg.recordDir != "" {
		return recordAlerts(ctx, cfg.recordDir, cfg.recordRuns, redisOpts, stderr)
	}

	if cfg.soak > 0 {
		redisURL := cfg.redisURL
		if redisURL == "" {
			redisURL = "redis://" + redisOpts.Addr // the redis-server redisFor started
		} else {
			fmt.Fprintln(stderr, "loadtest: soak: Redis used_memory and keys are the whole server's: other users of it count as growth")
		}
		return runSoak(ctx, cfg, redisURL, stdout, stderr)
	}

	if len(cfg.scenarios) > 0 {
		return runScenarioRows(ctx, cfg, redisOpts, stdout, stderr)
	}

	began := time.Now()
	rows, err := runMatrix(ctx, cfg, redisOpts, stderr)
	if err != nil {
		return err
	}
	if err := writeTable(stdout, cfg, rows); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(stderr, "loadtest: %d runs in %v\n", len(rows), time.Since(began).Round(100*time.Millisecond))
	if cfg.jsonFile != "" {
		if err := writeFile(cfg.jsonFile, func(w io.Writer) error { return writeJSON(w, cfg, rows) }); err != nil {
			return fmt.Errorf("write --json: %w", err)
		}
	}
	if cfg.svgFile != "" {
		if err := writeFile(cfg.svgFile, func(w io.Writer) error { return writeSVG(w, cfg, rows) }); err != nil {
			return fmt.Errorf("write --svg: %w", err)
		}
	}
	return nil
}

// runScenarioRows runs the rows of --scenario, writes their tables, and
// fails (errScenarioFailed) when an adaptive row missed its criterion.
func runScenarioRows(ctx context.Context, cfg *config, redisOpts *redis.Options, stdout, stderr io.Writer) error {
	began := time.Now()
	rows, err := runScenarios(ctx, cfg, redisOpts, stderr)
	if err != nil {
		return err
	}
	if err := writeScenarioTable(stdout, cfg, rows); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(stderr, "loadtest: %d runs in %v\n", len(rows), time.Since(began).Round(100*time.Millisecond))
	return scenarioVerdict(rows)
}

// writeFile creates name and fills it with write, reporting the first error
// of either or of closing it.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
