package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"smsdispatcher/provider"
	"smsdispatcher/suppress"
)

// Page 4, the opt-outs, deferred messages and guard blocks, and their
// operator actions.

// listView is one list of page 4.
type listView struct {
	Name, Title string
	Missing     string // why the list is not configured; "" when it is
	Columns     []string
	Rows        []listRow
	RowActions  []string // on a row: remove, release, drop, unblock
	NewActions  []string // of a new key: add, block
	Reason      bool     // the actions need a reason
	Query       string   // as shown: a whole number masked
	Err         string
	Operator    bool // the user may act
}

// listRow is a row as shown, and the token its actions post.
type listRow struct {
	Cells []string
	Token string // the row's key sealed (Handler.tokens); "" for a user who may not act
}

// namedList is a List with its URL name, title and what its absence
// means.
type namedList struct {
	name, title, missing string
	list                 List
}

// listsOf are page 4's lists, by their URL name.
func (h *Handler) listsOf() []namedList {
	return []namedList{
		{"optouts", "Opt-outs", "The suppression list is not wired in (docs/suppressions.md).", h.o.Lists.OptOuts},
		{"deferred", "Deferred messages", "No class has send windows or a cap (docs/windows.md).", h.o.Lists.Deferred},
		{"blocks", "Guard blocks", "No class has guard rules (docs/guard.md).", h.o.Lists.Blocks},
	}
}

// numberKeyed reports whether list name's key is a phone number: masked
// on the page and in the audit, its rows acted on by token.
func numberKeyed(name string) bool { return name == "optouts" }

// shownKey is a key of list name as the page and the audit show it.
func shownKey(name, key string) string {
	if numberKeyed(name) && key != "" {
		return provider.MaskNumber(key)
	}
	return key
}

// listRows bounds the rows each list shows.
const listRows = 200

// newKeyActions are the actions of a new key rather than of a row.
var newKeyActions = []string{"add", "block"}

// lists is page 4: opt-outs, deferred messages and guard blocks, each
// searchable, or said not configured. Numbers show masked to every role:
// an operator's row action posts the row's token, never the number, and
// a new opt-out is typed.
func (h *Handler) lists(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	u := userOf(r)
	var views []listView
	for _, l := range h.listsOf() {
		query := q.Get(l.name)
		v := listView{Name: l.name, Title: l.title, Query: query, Operator: u.MayAct()}
		if _, err := suppress.Key(query); err == nil {
			v.Query = shownKey(l.name, query)
		}
		if l.list == nil {
			v.Missing = l.missing
			views = append(views, v)
			continue
		}
		v.Columns, v.Reason = l.list.Columns(), l.name == "optouts"
		for _, a := range l.list.Actions() {
			if slices.Contains(newKeyActions, a) {
				v.NewActions = append(v.NewActions, a)
			} else {
				v.RowActions = append(v.RowActions, a)
			}
		}
		// An operator's rows are read with their keys in clear, for the
		// tokens; the page shows them masked.
		rows, err := l.list.Search(r.Context(), query, listRows, v.Operator)
		if err != nil {
			v.Err = err.Error()
		}
		for _, row := range rows {
			shown := listRow{Cells: slices.Clone(row)}
			if len(row) > 0 {
				shown.Cells[0] = shownKey(l.name, row[0])
				if v.Operator {
					shown.Token = h.tokens.seal(l.name, row[0])
				}
			}
			v.Rows = append(v.Rows, shown)
		}
		views = append(views, v)
	}
	h.render(w, r, "lists", views)
}

// listAction applies an operator's action to a list's row (its token) or
// of a new key (typed): operators only, audited with what it did, a
// number masked.
func (h *Handler) listAction(w http.ResponseWriter, r *http.Request) {
	name, action, key := r.PathValue("list"), r.PathValue("action"), strings.TrimSpace(r.FormValue("key"))
	sealed := true // the row's token, if any, is this console's
	if tok := r.FormValue("token"); key == "" && tok != "" {
		key, sealed = h.tokens.open(name, tok)
	}
	if !h.allowed(w, r, Operator, name+"."+action, shownKey(name, key)) {
		return
	}
	lists := h.listsOf()
	i := slices.IndexFunc(lists, func(l namedList) bool { return l.name == name })
	if i < 0 || lists[i].list == nil || !slices.Contains(lists[i].list.Actions(), action) {
		http.Error(w, "no such list or action", http.StatusNotFound)
		return
	}
	if !sealed {
		http.Error(w, "the row's token is not this console's (restarted since the page was read): search the list again", http.StatusBadRequest)
		return
	}
	a := Action{Name: action, Key: key, Reason: strings.TrimSpace(r.FormValue("reason"))}
	if s := r.FormValue("for"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			http.Error(w, fmt.Sprintf("for %q: want a duration such as 1h", s), http.StatusBadRequest)
			return
		}
		a.For = d
	}
	did, err := lists[i].list.Act(r.Context(), a)
	outcome := "ok"
	if err != nil {
		outcome, did = "error", err.Error()
	}
	shown := shownKey(name, key)
	h.auditDetail(r.Context(), userOf(r), name+"."+action, shown, outcome, did)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		h.render(w, r, "error", map[string]any{"What": action + " " + shown, "Err": err.Error()})
		return
	}
	// Back to the list, searched for the key: a number by its last four
	// digits, so that the URL holds no number.
	search := key
	if numberKeyed(name) {
		search = key[max(len(key)-4, 0):]
	}
	http.Redirect(w, r, h.o.Path+"/lists?"+url.Values{name: {search}}.Encode()+"#list-"+name, http.StatusSeeOther)
}

// accountConfig is an account's configuration as page 5 shows it: the
// fields named here and no other, so that no secret (tokens, keys, their
