package main

// consoleMutants break the web console's access, masking and actions.
var consoleMutants = []mutant{
	// The console's access and masking.
	{"M33", "the console checks no role: a viewer replays dead letters", []edit{
		{"console/console.go", "	if u.Role >= role {\n", "	if true {\n"},
	}, "./console/"},
	{"M34", "an IAP assertion for another backend is taken", []edit{
		{"console/auth.go", "AnyAudience: jwt.Audience{a.Audience}, ", ""},
	}, "./console/"},
	{"M35", "the console takes a write another site's page sent", []edit{
		{"console/console.go", "if err := crossOrigin.Check(r); err != nil {", "if err := crossOrigin.Check(r); err != nil && false {"},
	}, "./console/"},
	{"M36", "the dead letters page shows the message as sent: number and body", []edit{
		{"console/deadletters.go", "To: l.MaskedTo(),", "To: string(l.Data),"},
	}, "./console/"},
	{"SL13", "an account's own keywords ignored: ARRET through it says nothing", []edit{
		{"server/suppress.go", "	words, ok := s.keywords[account]\n", "	words, ok := s.keywords[\"\"]\n"},
	}, "./server/"},
	{"SL14", "sms_inbound_total counts every inbound reply as a change of the list", []edit{
		{"server/suppress.go", "	if changed {\n		return kw, inboundChanged, nil", "	if changed || true {\n		return kw, inboundChanged, nil"},
	}, "./server/"},
	{"SL15", "a stopped message's record is not written: dispatcher message cannot say which change stopped it", []edit{
		{"server/suppress.go", "		err = s.store.Refused(ctx, id, at, e)\n", "		err = s.store.Refused(ctx, id+\"-lost\", at, e)\n"},
	}, "./server/"},
	{"SL16", "dispatcher message does not print a message's suppression", []edit{
		{"cmd/dispatcher/message.go", "		if stopped {\n			fmt.Fprintln(stdout, operator.SuppressedNote(", "		if false && stopped {\n			fmt.Fprintln(stdout, operator.SuppressedNote("},
	}, "./cmd/dispatcher/"},

	// The console's lists.
	{"M37", "a list's action takes a viewer: a viewer removes an opt-out", []edit{
		{"console/lists.go", "if !h.allowed(w, r, Operator, name+\".\"+action, shownKey(name, key)) {", "if !h.allowed(w, r, Viewer, name+\".\"+action, shownKey(name, key)) {"},
	}, "./console/"},
	{"M38", "the lists show an operator the numbers in clear", []edit{
		{"console/lists.go", "shown.Cells[0] = shownKey(l.name, row[0])", "shown.Cells[0] = row[0]"},
	}, "./console/"},

	// The chart's denied series: counted in each process, told in its
	// beat, summed by the console.
	{"CD1", "the chart adds a process's whole count of denials at every reading, not what it denied since the last", []edit{
		{"console/history.go", "denied[class] += max(n-before.n, 0)", "denied[class] += n"},
	}, "./console/"},
	{"CD2", "the chart counts what the processes denied before the console started", []edit{
		{"console/history.go", "if known || h.readings > 0 {", "if known || h.readings >= 0 {"},
	}, "./console/"},
	{"CD3", "a beat tells no denials", []edit{
		{"status/heartbeat.go", "if n := byClass[class]; n > 0 {", "if n := byClass[class]; n < 0 {"},
	}, "./status/"},
	{"CD4", "a process counts every delivery it nacks as denied", []edit{
		{"server/denials.go", "if ev.Outcome == nack.Denied {", "if nack.ActionFor(ev.Outcome) == nack.Nack {"},
	}, "./server/"},
	// The opt-outs' alert and the demo's STOPs.
	{"OO1", "sms_suppression_changes_total without the account: SMSOptOutSpike cannot join opt-outs to sends", []edit{
		{"server/suppress.go", "s.changed(suppress.SourceInbound, action, account)", "s.changed(suppress.SourceInbound, action, \"\")"},
	}, "./server/"},
	{"OO2", "the demo's STOPs all come through its first account: no STOP through the second", []edit{
		{"internal/demo/optouts.go", "through := accounts[(k/2)%len(accounts)]", "through := accounts[0]"},
	}, "./internal/demo/"},
	// The guard's counter lingers: sends that queue close together share a call.
	{"GB1", "the guard's counter does not linger: each send its own call of sent.lua", []edit{
		{"guard/guard.go", "linger := time.NewTimer(g.opts.Linger)", "linger := time.NewTimer(0)"},
	}, "./guard/"},
	{"GB2", "a verification that comes while its send lingers is ignored as unknown", []edit{
		{"guard/verifications.go", "if err == nil && len(in) == 0 {", "if false {"},
	}, "./guard/"},
	// The console's replay, chart, override, masking, rules, timeline, mounting and pause.
	{"CG1", "the console replays without a dry run's list", []edit{
		{"console/deadletters.go", "if len(ids) == 0 || !h.proof.valid(", "if len(ids) == 0 && !h.proof.valid("},
	}, "./console/"},
	{"CG2", "the console's replay re-reads the selection instead of the dry run's ids", []edit{
		{"console/deadletters.go", "h.runReplay(w, r, deadletter.Filter{IDs: ids}, false)", "h.runReplay(w, r, deadletter.Filter{}, false)"},
	}, "./console/"},
	{"CG3", "the console's chart has no sampler: it reads only when a page asks", []edit{
		{"console/console.go", "	go h.sample(ctx)\n", "	go func() { <-ctx.Done(); close(h.sampled) }()\n"},
	}, "./console/"},
	{"CG4", "the chart draws an account's 429 on every account's row", []edit{
		{"console/history.go", "slices.Contains(h.throttled[sec], account)", "len(h.throttled[sec]) > 0"},
	}, "./console/"},
	{"CG5", "the delivered ratio is drawn on the sends' scale", []edit{
		{"console/history.go", "ratioHeight-int(r*ratioHeight)", "chartHeight-int(r*chartHeight)"},
	}, "./console/"},
	{"CG6", "a viewer sets an account's override from the console", []edit{
		{"console/pages.go", "if !h.allowed(w, r, Operator, action, name) {", "if !h.allowed(w, r, Viewer, action, name) {"},
	}, "./console/"},
	{"CG7", "a viewer reads a message's number from the Message page", []edit{
		{"console/message.go", "id := strings.TrimSpace(r.FormValue(\"message_id\"))\n\tif !h.allowed(w, r, Support,", "id := strings.TrimSpace(r.FormValue(\"message_id\"))\n\tif !h.allowed(w, r, Viewer,"},
	}, "./console/"},
	{"CG8", "the configuration page says a class without suppression is on the list", []edit{
		{"console/rules.go", "if !pol.Suppressed {", "if pol.Suppressed {"},
	}, "./console/"},
	{"CG9", "the demo's console logs at Warn: its audit lines are dropped", []edit{
		{"cmd/dispatcher/demo.go", "&slog.HandlerOptions{Level: slog.LevelInfo}", "&slog.HandlerOptions{Level: slog.LevelWarn}"},
	}, "./cmd/dispatcher/"},
	{"CG10", "the message's timeline is not in time order: the notes after the ledger's events", []edit{
		{"console/message.go", "slices.SortStableFunc(all, func(a, b event) int { return a.sortAt.Compare(b.sortAt) })", "_ = all"},
	}, "./console/"},
	{"CG11", "the overview's chart fetches /chart from the root, not under the console's path", []edit{
		{"console/templates/overview.html", `data-src="{{.Base}}/chart"`, `data-src="/chart"`},
	}, "./console/"},
	{"CG12", "a list's action redirects to the root's /lists, not under the console's path", []edit{
		{"console/lists.go", `http.Redirect(w, r, h.o.Path+"/lists?"`, `http.Redirect(w, r, "/lists?"`},
	}, "./console/"},
	{"CG13", "the overview shows an account pause without its reason", []edit{
		{"status/text.go", `return fmt.Sprintf("account paused, %v left (%s)", left, p.Detail)`, `return fmt.Sprintf("account paused, %v left", left)`},
	}, "./console/"},
	{"CG14", "a drop from the lists page publishes no final status event: its producer never learns the message's end", []edit{
		{"console/console.go", "Classes: deferring, Status: status}", "Classes: deferring}"},
	}, "./console/"},
}
