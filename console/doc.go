// Package console is the dispatcher's web console (docs/console.md): an
// http.Handler (NewHandler) serving, each at a stable URL, the accounts
// live with the last hour's chart (/), a message's story (/message), the
// dead letters and their replay (/deadletters), the lists of the features
// wired in (/lists) and the configuration in force (/config). `dispatcher
// console` serves it; a Go program may mount it.
//
// Invariants: it reads and acts only through the code the dispatcher's
// commands use (internal/operator, status, deadletter), so a page shows
// what `status`, `message` and `deadletters list` print, a replay does
// what `deadletters replay` does to the letters its dry run listed (the
// list signed by the handler, a replay without one refused), and a list's
// action what
// `suppressions`, `deferred` or `guard` does. Every request has a user
// (an Auth: Local only on loopback, Basic, IAP), every write is a POST
// refused when cross-origin and when the user's role is below the action's,
// and every action and refusal is an `audit` log line and a count. A
// number shows masked to its last four digits (provider.MaskNumber) to
// every role, on every page and in the audit lines, except on
// /deadletters/number and /message/number: to support and operators, one
// message at a time, each reading audited. A list's row action posts an
// opaque token, never the number. Templates, style and script are
// embedded; nothing is fetched from elsewhere.
//
// Files: console.go (the handler, its options, the chart's sampler,
// rendering, audit), auth.go (users, roles, Local, Basic, IAP, the
// settings), a file a page: pages.go (the overview, an account's
// override, the configuration), message.go (a message's timeline, a
// number's reveal), deadletters.go (the list, the dry run, the replay),
// lists.go (opt-outs, deferred messages, guard blocks); rules.go (a
// class's rules as the configuration shows them), proof.go (the
// signature of a dry run's list), history.go (the chart's history and
// drawing), templates/ and assets/.
package console
