package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/operator"
	"smsdispatcher/status"
)

// Page 1, the overview (with the chart and an account's override), and
// page 5, the configuration.

// report reads every account's state now. The chart is the sampler's
// (Handler.sample): a page's reading is not added to it, so that the
// readings it takes in come one after the other.
func (h *Handler) report(ctx context.Context) (status.Report, error) {
	return status.Read(ctx, status.Redis{Client: h.o.Redis, Timeout: h.o.Timeout}, h.setups, h.routing, time.Now())
}

// classNames are the configured classes' names, in priority order.
func (h *Handler) classNames() []string {
	var names []string
	for _, c := range h.o.Settings.ClassList() {
		names = append(names, c.Name.String())
	}
	return names
}

// overview is page 1: every account, the chart, the processes.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	rep, err := h.report(r.Context())
	if err != nil {
		h.fail(w, r, "reading the accounts' state in Redis", err)
		return
	}
	h.render(w, r, "overview", map[string]any{"Report": rep, "Classes": h.classNames(), "Chart": h.chartNow()})
}

// chartFragment is the chart alone, which the overview's script fetches
// every few seconds: the sampler's readings, no Redis call.
func (h *Handler) chartFragment(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.pages["overview"].ExecuteTemplate(w, "chart", h.chartNow()); err != nil {
		h.logger.Warn("console: render chart", "err", err)
	}
}

// chartNow is the chart up to now, against every account's contract.
func (h *Handler) chartNow() chartView {
	contract := 0.0
	var accounts []string
	for _, s := range h.setups {
		contract += s.ContractRPS
		accounts = append(accounts, s.Name)
	}
	v := h.chart.view(time.Now(), h.classNames(), accounts, contract)
	v.SampleSeconds = h.o.SampleEvery.Seconds()
	return v
}

// override sets or clears an account's override (the form's action, set
// or clear) as `dispatcher override --set-target-rps, --set-marketing-rps,
// --ttl, --clear` does: operators only, audited with what it did.
func (h *Handler) override(w http.ResponseWriter, r *http.Request) {
	name, clear := r.PathValue("account"), r.FormValue("action") == "clear"
	action := "override.set"
	if clear {
		action = "override.clear"
	}
	if !h.allowed(w, r, Operator, action, name) {
		return
	}
	i := slices.IndexFunc(h.setups, func(s status.Setup) bool { return s.Name == name })
	if i < 0 {
		http.Error(w, "no such account", http.StatusNotFound)
		return
	}
	o, err := overrideOf(r, clear)
	if err == nil {
		err = operator.CheckOverride(o, [3]string{"target_rps", "marketing_rps", "ttl"})
	}
	if err != nil {
		h.auditDetail(r.Context(), userOf(r), action, name, "error", err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	did, err := operator.ChangeOverride(r.Context(), h.setups[i].Limiter, h.setups[i].Account, o)
	if err != nil {
		h.auditDetail(r.Context(), userOf(r), action, name, "error", err.Error())
		h.fail(w, r, "changing the override in Redis", err)
		return
	}
	h.auditDetail(r.Context(), userOf(r), action, name, "ok", did)
	http.Redirect(w, r, h.o.Path+"/#account-"+url.PathEscape(name), http.StatusSeeOther)
}

// overrideOf is the override r's form asks for: target_rps and
// marketing_rps (empty: not lowered), ttl (empty: an hour, as
// `dispatcher override`'s; 0: until cleared).
func overrideOf(r *http.Request, clear bool) (operator.Override, error) {
	o := operator.Override{TTL: time.Hour, Clear: clear}
	if clear {
		return o, nil
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"target_rps", &o.TargetRPS}, {"marketing_rps", &o.MarketingRPS}} {
		if v := strings.TrimSpace(r.FormValue(f.name)); v != "" {
			rps, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return o, fmt.Errorf("%s %q: want a number of units per second", f.name, v)
			}
			*f.to = rps
		}
	}
	if v := strings.TrimSpace(r.FormValue("ttl")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return o, fmt.Errorf("ttl %q: want a duration such as 1h (0: until cleared)", v)
		}
		o.TTL = d
	}
	return o, nil
}

// files) can show.
type accountConfig struct {
	Name, Provider, RateUnit             string
	Classes                              []admission.Class
	ContractRPS, TargetRPS, MarketingRPS float64
	ClassRPS, ReserveRPS                 map[admission.Class]float64
	Burst, MaxInFlight, MaxSegments      int
	MinDeliveredRatio                    float64
	InForceRPS                           float64
	Override                             *status.Override
}

// configuration is page 5: the classes and their rules, accounts, routes
// and limits in force.
func (h *Handler) configuration(w http.ResponseWriter, r *http.Request) {
	rep, err := h.report(r.Context())
	if err != nil {
		h.fail(w, r, "reading the accounts' state in Redis", err)
		return
	}
	var accounts []accountConfig
	for i, a := range h.routing.Accounts {
		c := accountConfig{Name: a.Name, Provider: a.Provider, RateUnit: a.RateUnit, Classes: a.Classes,
			ContractRPS: a.ContractRPS, TargetRPS: a.TargetRPS, MarketingRPS: a.MarketingRPS, ClassRPS: a.ClassRPS, ReserveRPS: a.ReserveRPS,
			Burst: a.Burst, MaxInFlight: a.MaxInFlight, MaxSegments: a.MaxSegments, MinDeliveredRatio: a.MinDeliveredRatio}
		if i < len(rep.Accounts) {
			c.InForceRPS, c.Override = rep.Accounts[i].InForceRPS, rep.Accounts[i].Override
		}
		accounts = append(accounts, c)
	}
	h.render(w, r, "config", map[string]any{"Classes": h.o.Settings.ClassList(), "Rules": rulesOf(h.o.Settings.Process),
		"Accounts": accounts, "Route": rep.Route, "Routes": rep.Routes})
}
