package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"smsdispatcher/config"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/operator"
	"smsdispatcher/status"
	"smsdispatcher/suppress"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Options are what a console reads and who may use it.
type Options struct {
	// Settings are the dispatcher's: its accounts, classes, routes and
	// subscriptions, as the pool reads them.
	Settings config.Settings
	// Redis is the limiter's Redis; PubSub the project of the dispatcher's
	// topics and subscriptions.
	Redis  redis.UniversalClient
	PubSub *pubsub.Client
	// Auth says who asks (required): Local, Basic, *IAP or AuthFromEnv's.
	Auth Auth
	// Path is where the handler is mounted ("" the root; "/console" when
	// served under http.StripPrefix("/console", ...)).
	Path string
	// Logger takes the audit lines and the errors; nil: slog.Default().
	Logger *slog.Logger
	// Meter counts the actions (MetricActions); nil: otel's global.
	Meter metric.Meter
	// Lists are the lists of the opt-outs page; each nil is shown as not
	// configured.
	Lists Lists
	// DeadLetterWait is how long reading the dead letters waits for more
	// once none arrives (0: 2 s).
	DeadLetterWait time.Duration
	// Timeout bounds each Redis call (0: 2 s).
	Timeout time.Duration
	// SampleEvery is how often the chart's sampler reads every account's
	// state, whether or not anyone looks (0: 2 s).
	SampleEvery time.Duration
}

// Lists are the lists an operator searches and acts on besides the dead
// letters: each is a feature of its own, wired in by the program that
// has it (FeatureLists); a nil one is shown as not configured.
type Lists struct {
	OptOuts  List
	Deferred List
	Blocks   List
}

// A List is one searchable list of the lists page and its operator
// actions (internal/operator's, which the dispatcher's commands share).
type List = operator.List

// An Action is an operator's action on a List.
type Action = operator.Action

// FeatureLists are the lists of cfg's features on rdb: the suppression
// list (always; its changes published to SUPPRESSIONS_TOPIC on ps as
// `dispatcher suppressions` publishes them), the deferred messages of
// the classes with send windows or a cap, the blocks of the classes with
// guard rules; each nil when no class has it. stop stops the mirror's
// publisher.
func FeatureLists(cfg config.Settings, rdb redis.UniversalClient, ps *pubsub.Client) (lists Lists, stop func(), err error) {
	routing, err := cfg.Routing()
	if err != nil {
		return Lists{}, nil, err
	}
	if len(routing.Classes) > 0 {
		cfg.Lanes = routing.Classes
	}
	mirror := &suppress.TopicMirror{Publisher: ps.Publisher(cfg.SuppressionsTopic)}
	lists.OptOuts = operator.OptOuts{Store: suppress.NewStore(rdb, "", mirror), Wait: mirror.Wait}
	deferring, err := operator.DeferringClasses(cfg, "")
	if err != nil {
		mirror.Publisher.Stop()
		return Lists{}, nil, err
	}
	stop = mirror.Publisher.Stop
	if len(deferring) > 0 {
		status := ps.Publisher(cfg.StatusTopic) // a drop's final status event
		lists.Deferred = operator.Deferred{Store: deferral.New(rdb, nil, nil), Classes: deferring, Status: status}
		stop = func() { mirror.Publisher.Stop(); status.Stop() }
	}
	if guarded := operator.GuardedClasses(cfg.ClassList()); len(guarded) > 0 {
		lists.Blocks = operator.Blocks{Redis: rdb, Classes: guarded}
	}
	return lists, stop, nil
}

// MetricActions counts the console's actions by action and outcome
// (sms_console_actions_total).
const MetricActions = "sms.console.actions"

// Handler is the console: an http.Handler serving its pages.
type Handler struct {
	o       Options
	mux     *http.ServeMux
	pages   map[string]*template.Template
	setups  []status.Setup
	routing config.Routing
	logger  *slog.Logger
	actions metric.Int64Counter
	chart   *history
	proof   proofKey // signs a dry run's list (replay)
	tokens  sealer   // seals a list's row key (lists)

	stopSampler context.CancelFunc
	sampled     chan struct{} // closed when the sampler has returned
}

// NewHandler returns the console of o, its chart's sampler started: it
// reads every account's state every Options.SampleEvery until Close.
// Besides the sampler, it reads Redis and Pub/Sub only when a page asks.
func NewHandler(o Options) (*Handler, error) {
	if o.Auth == nil {
		return nil, errors.New("console: Options.Auth is required")
	}
	if o.Redis == nil || o.PubSub == nil {
		return nil, errors.New("console: Options.Redis and Options.PubSub are required")
	}
	o.Path = strings.TrimSuffix(o.Path, "/")
	if o.DeadLetterWait <= 0 {
		o.DeadLetterWait = 2 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 2 * time.Second
	}
	h := &Handler{o: o, logger: o.Logger, chart: newHistory(), proof: newProofKey(), tokens: newSealer()}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	var err error
	if h.routing, err = o.Settings.Routing(); err != nil {
		return nil, err
	}
	if len(h.routing.Classes) > 0 {
		h.o.Settings.Lanes = h.routing.Classes // ACCOUNTS_FILE's classes, as serve reads them
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if h.setups, err = operator.Setups(o.Redis, o.Settings, h.routing.Accounts, o.Timeout, quiet); err != nil {
		return nil, err
	}
	meter := o.Meter
	if meter == nil {
		meter = otel.GetMeterProvider().Meter("smsdispatcher/console")
	}
	if h.actions, err = meter.Int64Counter(MetricActions, metric.WithUnit("{action}"),
		metric.WithDescription("The console's actions (replay, dry_run, reveal_number, a list's action, override.set, override.clear), by action and outcome (ok, error, forbidden, refused, not_found).")); err != nil {
		return nil, err
	}
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	h.routes()
	ctx, stop := context.WithCancel(context.Background())
	h.stopSampler, h.sampled = stop, make(chan struct{})
	go h.sample(ctx)
	return h, nil
}

// Close stops the chart's sampler and waits for it to return. The
// handler still serves its pages; the chart stops moving.
func (h *Handler) Close() {
	h.stopSampler()
	<-h.sampled
}

// sample is the chart's sampler: a reading of every account's state at
// once and then every SampleEvery, each added to the chart, until ctx
// ends. A failed reading is logged and the next one tried: the chart has
// a gap where Redis did not answer for more than a minute.
func (h *Handler) sample(ctx context.Context) {
	defer close(h.sampled)
	tick := time.NewTicker(h.o.SampleEvery)
	defer tick.Stop()
	for {
		rep, err := status.Read(ctx, status.Redis{Client: h.o.Redis, Timeout: h.o.Timeout}, h.setups, h.routing, time.Now())
		switch {
		case err == nil:
			h.chart.add(rep)
		case ctx.Err() == nil:
			h.logger.Warn("console: the chart's reading", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// routes are the console's pages: each a stable URL an operator can paste.
func (h *Handler) routes() {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFiles, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /chart", h.chartFragment)
	mux.HandleFunc("GET /message", h.message)
	mux.HandleFunc("POST /message/number", h.messageNumber)
	mux.HandleFunc("GET /deadletters", h.deadLetters)
	mux.HandleFunc("POST /deadletters/replay", h.replay)
	mux.HandleFunc("POST /deadletters/number", h.number)
	mux.HandleFunc("POST /accounts/{account}/override", h.override)
	mux.HandleFunc("GET /lists", h.lists)
	mux.HandleFunc("POST /lists/{list}/{action}", h.listAction)
	mux.HandleFunc("GET /config", h.configuration)
	h.mux = mux
}

// userKey is the context key of the request's User.
type userKey struct{}

// ServeHTTP authenticates every request, refuses cross-origin writes
// (http.CrossOriginProtection: the browser's Sec-Fetch-Site or Origin
// must be this host) and serves the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := h.o.Auth.User(r)
	if err != nil {
		if c := h.o.Auth.Challenge(); c != "" {
			w.Header().Set("WWW-Authenticate", c)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
	if err := crossOrigin.Check(r); err != nil {
		h.audit(r.Context(), u, "cross_origin", r.URL.Path, "forbidden")
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
}

// crossOrigin refuses the writes a browser sends from another origin:
// the console's CSRF protection.
var crossOrigin = http.NewCrossOriginProtection()

// userOf is r's User, as ServeHTTP found it.
func userOf(r *http.Request) User { return r.Context().Value(userKey{}).(User) }

// allowed reports whether r's user has role at least; if not, it answers
// 403 and audits the refusal of action on target.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, role Role, action, target string) bool {
	u := userOf(r)
	if u.Role >= role {
		return true
	}
	h.audit(r.Context(), u, action, target, "forbidden")
	w.WriteHeader(http.StatusForbidden)
	h.render(w, r, "forbidden", map[string]any{"Action": action, "Need": role.String()})
	return false
}

// audit logs one action as a structured "audit" line and counts it.
func (h *Handler) audit(ctx context.Context, u User, action, target, outcome string) {
	h.auditDetail(ctx, u, action, target, outcome, "")
}

// auditDetail is audit with what the action did, in words.
func (h *Handler) auditDetail(ctx context.Context, u User, action, target, outcome, detail string) {
	attrs := []slog.Attr{slog.String("user", u.Name), slog.String("role", u.Role.String()),
		slog.String("action", action), slog.String("target", target), slog.String("outcome", outcome)}
	if detail != "" {
		attrs = append(attrs, slog.String("detail", detail))
	}
	h.logger.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
	h.actions.Add(ctx, 1, metric.WithAttributes(attribute.String("action", action), attribute.String("outcome", outcome)))
}

// fail answers a page whose reading failed: 502, the error in a line (no
// secret: the clients' errors never hold the URLs' passwords).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.logger.Warn("console: "+what, "err", err, "path", r.URL.Path)
	w.WriteHeader(http.StatusBadGateway)
	h.render(w, r, "error", map[string]any{"What": what, "Err": err.Error()})
}

// page is what every page's layout reads besides its own data.
type page struct {
	Base  string
	Title string
	Nav   string
	User  User
	Data  any
}

// render writes the page name with data.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	p := page{Base: h.o.Path, Title: titles[name], Nav: name, User: userOf(r), Data: data}
	if err := h.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		h.logger.Warn("console: render", "page", name, "err", err)
	}
}

// titles are the pages' titles, by template name.
var titles = map[string]string{
	"overview": "Overview", "message": "Message", "deadletters": "Dead letters", "replay": "Replay",
	"number": "Number", "lists": "Opt-outs, deferred, blocks", "config": "Configuration",
	"forbidden": "Forbidden", "error": "Error",
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for name := range titles {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"rps": func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	"pct": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f %%", *v*100)
	},
	"join":    func(s []string) string { return strings.Join(s, ", ") },
	"clock":   func(t time.Time) string { return t.Format("15:04:05 UTC") },
	"secs":    func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " s" },
	"deref":   func(v *float64) float64 { return *v },
	"penalty": (*status.Penalty).Text,
	"round":   math.Round,
}
