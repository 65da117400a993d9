package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/console"
	"smsdispatcher/internal/topology"
	"smsdispatcher/server"
	"smsdispatcher/telemetry"
)

// defaultConsoleAddr is CONSOLE_ADDR's default: loopback, where the
// console needs no authentication.
const defaultConsoleAddr = "127.0.0.1:8090"

// consoleStopBound bounds the wait for the console's requests at the end.
const consoleStopBound = 10 * time.Second

// runConsole is `dispatcher console`: the web console (docs/console.md)
// on CONSOLE_ADDR, reading the pool's Redis and Pub/Sub, until ctx ends.
func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("console", stderr)
	load := config.Flags(fs, config.Pubsub|config.Subscriptions|config.Topics|config.DeadLetters|config.Redis|config.Accounts, environ)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("console: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	addr := environ("CONSOLE_ADDR")
	if addr == "" {
		addr = defaultConsoleAddr
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return &console.SettingError{Env: "CONSOLE_ADDR", Msg: fmt.Sprintf("%q: want host:port, such as %s", addr, defaultConsoleAddr)}
	}
	auth, err := console.AuthFromEnv(environ, addr)
	if err != nil {
		return err
	}
	rdb, _, err := operatorRedis(cfg, "the console reads the limiter's Redis", operatorTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	metrics, err := telemetry.NewMetrics()
	if err != nil {
		return err
	}
	defer metrics.Shutdown(context.WithoutCancel(ctx))
	h, err := console.NewHandler(console.Options{Settings: cfg, Redis: rdb, PubSub: ps, Auth: auth, Logger: logger, Meter: metrics.Meter()})
	if err != nil {
		return err
	}
	servers := []*http.Server{server.NewHTTPServer(h)}
	listeners := []string{addr}
	// /metrics (sms_console_actions_total) and /healthz, unauthenticated,
	// on a port of their own that only the cluster reaches.
	if metricsAddr := environ("CONSOLE_METRICS_ADDR"); metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		servers, listeners = append(servers, server.NewHTTPServer(mux)), append(listeners, metricsAddr)
	}
	served := make(chan error, len(servers))
	for i, srv := range servers {
		ln, err := net.Listen("tcp", listeners[i])
		if err != nil {
			return &console.SettingError{Env: []string{"CONSOLE_ADDR", "CONSOLE_METRICS_ADDR"}[i], Msg: err.Error()}
		}
		defer srv.Close()
		go func() { served <- srv.Serve(ln) }()
		if i == 0 {
			fmt.Fprintf(stdout, "console on http://%s/\n", ln.Addr())
		}
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consoleStopBound)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}
