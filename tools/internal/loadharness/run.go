package loadharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/tools/internal/redisserver"
)

// Matrix runs what cfg (from ParseMatrix) asks for: the matrix, whose table
// it writes to stdout (and --json, --svg to their files), or the rows of
// --scenario, failing when an adaptive row missed its criterion. Progress
// goes to stderr. A redis-server it starts is stopped before it returns.
func Matrix(ctx context.Context, cfg *Config, stdout, stderr io.Writer) error {
	return redisserver.With(ctx, cfg.redisURL, stderr, func(redisOpts *redis.Options) error {
		if len(cfg.scenarios) > 0 || cfg.failover || cfg.receipts || cfg.classes || cfg.accountsRun || cfg.backlogRun || cfg.suppressionsRun || cfg.pumpingRun || cfg.deferredRun {
			return runScenarioRows(ctx, cfg, redisOpts, stdout, stderr)
		}
		return runMatrixRows(ctx, cfg, redisOpts, stdout, stderr)
	})
}

// runMatrixRows runs the matrix and writes its table, --json and --svg.
func runMatrixRows(ctx context.Context, cfg *Config, redisOpts *redis.Options, stdout, stderr io.Writer) error {
	rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, runMatrix, writeTable)
	if err != nil {
		return err
	}
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

// Soak runs the soak cfg (from ParseSoak) describes, writes its table to
// stdout and progress to stderr, and fails when the run misses its
// criterion. The sender processes are this program started again with
// SoakSenderEnv set: its main must hand those to SoakSender first.
func Soak(ctx context.Context, cfg *Config, stdout, stderr io.Writer) error {
	return redisserver.With(ctx, cfg.redisURL, stderr, func(redisOpts *redis.Options) error {
		redisURL := cfg.redisURL
		if redisURL == "" {
			redisURL = "redis://" + redisOpts.Addr // the redis-server With started
		} else {
			fmt.Fprintln(stderr, "loadtest: soak: Redis used_memory and keys are the whole server's: other users of it count as growth")
		}
		return runSoak(ctx, cfg, redisURL, stdout, stderr)
	})
}

// runScenarioRows runs the rows of --scenario, writes their tables, and
// fails (errScenarioFailed) when an adaptive row, a failover after row,
// the receipts row, the classes or the backlog after row missed its
// criterion. The failover rows run after the others, then the receipts
// row, the classes rows, the backlog rows, the accounts rows last.
func runScenarioRows(ctx context.Context, cfg *Config, redisOpts *redis.Options, stdout, stderr io.Writer) error {
	var verdicts []error
	if len(cfg.scenarios) > 0 {
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, runScenarios, writeScenarioTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, scenarioVerdict(rows))
	}
	if cfg.failover {
		redisURL := cfg.redisURL
		if redisURL == "" {
			redisURL = "redis://" + redisOpts.Addr // the redis-server With started
		}
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*failoverRow, error) {
			return runFailoverRows(ctx, cfg, redisURL, progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeFailoverTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, failoverVerdict(rows))
	}
	if cfg.receipts {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*receiptsRow, error) {
			r, err := runReceiptsRow(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
			if err != nil {
				return nil, err
			}
			return []*receiptsRow{r}, nil
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeReceiptsTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, receiptsVerdict(rows[0]))
	}
	if cfg.classes {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*classesRow, error) {
			return runClassesRows(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeClassesTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, classesVerdict(rows))
	}
	if cfg.backlogRun {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*backlogRow, error) {
			return runBacklogRows(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeBacklogTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, backlogVerdict(rows))
	}
	if cfg.accountsRun {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*accountsRow, error) {
			return runAccountsRows(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeAccountsTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, accountsVerdict(rows))
	}
	if cfg.suppressionsRun {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*suppressionsRow, error) {
			return runSuppressionsRows(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writeSuppressionsTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, suppressionsVerdict(rows))
	}
	if cfg.pumpingRun {
		run := func(ctx context.Context, cfg *Config, _ *redis.Options, progress io.Writer) ([]*pumpingRow, error) {
			return runPumpingRows(ctx, cfg, redisURLOf(cfg, redisOpts), progress)
		}
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, run, writePumpingTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, pumpingVerdict(rows))
	}
	if cfg.deferredRun {
		rows, err := tabulate(ctx, cfg, redisOpts, stdout, stderr, runDeferredRows, writeDeferredTable)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, deferredVerdict(rows))
	}
	return errors.Join(verdicts...)
}

// redisURLOf is the URL of the Redis the run uses: --redis-url, or the
// redis-server redisserver.With started.
func redisURLOf(cfg *Config, redisOpts *redis.Options) string {
	if cfg.redisURL != "" {
		return cfg.redisURL
	}
	return "redis://" + redisOpts.Addr
}

// tabulate runs the rows with run (progress to stderr), writes their table
// to stdout with write, and says on stderr how many runs took how long.
func tabulate[R any](ctx context.Context, cfg *Config, redisOpts *redis.Options, stdout, stderr io.Writer,
	run func(context.Context, *Config, *redis.Options, io.Writer) ([]R, error),
	write func(io.Writer, *Config, []R) error) ([]R, error) {
	began := time.Now()
	rows, err := run(ctx, cfg, redisOpts, stderr)
	if err != nil {
		return nil, err
	}
	if err := write(stdout, cfg, rows); err != nil {
		return nil, fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(stderr, "loadtest: %d runs in %v\n", len(rows), time.Since(began).Round(100*time.Millisecond))
	return rows, nil
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
