package main

// optOutMutants break the opt-outs' gaps closed after their audit (issue
// 42): a provider's word settling a message, the mirror's delivery, and
// the inbound path.
var optOutMutants = []mutant{
	{"OX1", "a Vonage opt-out's receipt folded as the failure it says: the message is not settled suppressed", []edit{
		{"receipts/handler.go", "		rep.Status, rep.Final, rep.Delivered = ledger.StatusSuppressed, true, false\n", ""},
	}, "./cmd/dispatcher/"},
	{"OX2", "a suppressed message's resend handed out", []edit{
		{"ledger/receipt/fold.lua", "    if new == 'suppressed' then", "    if false then"},
	}, "./ledger/"},
	{"OX3", "the generic API's opted-out answer read as any refusal: dead-lettered", []edit{
		{"provider/client.go", "if json.Unmarshal(head, &a) == nil && a.Code == GenericOptedOut {", "if json.Unmarshal(head, &a) == nil && false {"},
	}, "./provider/"},
	{"OX4", "a START does not lift a STOP: it puts the number on the list", []edit{
		{"server/suppress.go", "			if kw == suppress.KeywordStart {\n				change, action = s.store.Remove, suppress.ActionRemove", "			if false {\n				change, action = s.store.Remove, suppress.ActionRemove"},
	}, "./server/"},
	{"OX5", "a forged Vonage inbound message is taken: a forger's STOP changes the list", []edit{
		{"provider/inbound.go", "if err := v.verify(params); err != nil {", "if err := v.verify(params); false && err != nil {"},
	}, "./server/"},
	{"OX6", "an import forgets each entry's source: a flush then an import does not restore the list", []edit{
		{"suppress/store.go", "			if e.Source == \"\" {\n				e.Source = SourceImport", "			if true {\n				e.Source = SourceImport"},
	}, "./suppress/"},
	{"OX7", "the mirror is never told: no change reaches SUPPRESSIONS_TOPIC", []edit{
		{"suppress/store.go", "	if s.mirror != nil {\n		s.mirror.Mirror(ctx, mirrored)\n	}\n	return changed, nil", "	_ = mirrored\n	return changed, nil"},
	}, "./server/"},
	{"OX8", "the mirror is told only when the list changed: a change whose publish failed is missing for good", []edit{
		{"suppress/store.go", "	if s.mirror != nil {\n		s.mirror.Mirror(ctx, mirrored)\n	}\n	return changed, nil", "	if s.mirror != nil && changed {\n		s.mirror.Mirror(ctx, mirrored)\n	}\n	return changed, nil"},
	}, "./server/"},
	{"OX9", "a Vonage opt-out's message settled suppressed without the record of its change: dispatcher message cannot say it", []edit{
		{"receipts/handler.go", "		s.cfg.Inbound.SettledSuppressed(r.Context(), f.ID, f.Class, dr.OptedOut)\n", ""},
	}, "./cmd/dispatcher/"},
	{"OX10", "a message a Vonage receipt settles suppressed is not counted in sms_suppressed_total", []edit{
		{"server/suppress.go", "		s.suppressed(class, suppress.SourceProvider)\n", ""},
	}, "./cmd/dispatcher/"},
	{"OX11", "every request waits for every publish: one takes another's failure, which answers 200 and never publishes its change", []edit{
		{"suppress/mirror.go", "	return context.WithValue(ctx, batchKey{}, &batch{})\n", "	return ctx\n"},
	}, "./suppress/"},
}
