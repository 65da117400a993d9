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
}
