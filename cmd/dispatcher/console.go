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
	addr, auth, err := consoleAccess()
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
	metrics, err := telemetry.NewMetrics()
	if err != nil {
		return err
	}
	defer metrics.Shutdown(context.WithoutCancel(ctx))
	lists, stopLists, err := console.FeatureLists(cfg, rdb, ps)
	if err != nil {
		return err
	}
	defer stopLists()
	h, err := console.NewHandler(console.Options{Settings: cfg, Redis: rdb, PubSub: ps, Auth: auth, Lists: lists,
		Logger: slog.New(slog.NewJSONHandler(stderr, nil)), Meter: metrics.Meter()})
	if err != nil {
		return err
	}
	defer h.Close()
	servers := []listening{{addr, "CONSOLE_ADDR", h}}
	// /metrics (sms_console_actions_total) and /healthz, unauthenticated,
	// on a port of their own that only the cluster reaches.
	if metricsAddr := environ("CONSOLE_METRICS_ADDR"); metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
		servers = append(servers, listening{metricsAddr, "CONSOLE_METRICS_ADDR", mux})
	}
	served, stop, err := serveHTTP(servers)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "console on http://%s/\n", served[0])
	select {
	case err := <-stop.failed:
		stop.now()
		return err
	case <-ctx.Done():
	}
	return stop.now()
}

// consoleAccess is the console's address (CONSOLE_ADDR) and who may use
// it (CONSOLE_AUTH and its companions), or the error naming the variable.
func consoleAccess() (string, console.Auth, error) {
	addr := environ("CONSOLE_ADDR")
	if addr == "" {
		addr = defaultConsoleAddr
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", nil, &console.SettingError{Env: "CONSOLE_ADDR", Msg: fmt.Sprintf("%q: want host:port, such as %s", addr, defaultConsoleAddr)}
	}
	auth, err := console.AuthFromEnv(environ, addr)
	return addr, auth, err
}

// listening is one HTTP server to start: its address, the variable that
// gave it, its handler.
type listening struct {
	addr, env string
	handler   http.Handler
}

// stopper stops the servers serveHTTP started; failed says that one
// stopped by itself.
type stopper struct {
	failed <-chan error
	now    func() error
}

// serveHTTP starts servers, each behind the HTTP server's limits, and
// returns the addresses they listen on. A listener that cannot be opened
// is an error naming its variable.
func serveHTTP(servers []listening) ([]net.Addr, stopper, error) {
	var started []*http.Server
	stopAll := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), consoleStopBound)
		defer cancel()
		var errs []error
		for _, srv := range started {
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	failed := make(chan error, len(servers))
	var addrs []net.Addr
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			stopAll()
			return nil, stopper{}, &console.SettingError{Env: s.env, Msg: err.Error()}
		}
		srv := server.NewHTTPServer(s.handler)
		started = append(started, srv)
		addrs = append(addrs, ln.Addr())
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				failed <- err
			}
		}()
	}
	return addrs, stopper{failed: failed, now: stopAll}, nil
}
