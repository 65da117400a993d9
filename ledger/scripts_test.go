package ledger

import (
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestScriptCallsFollowTheirHeaders: each call struct of the ledger's
// scripts (admission's test checks its own) lists its script's
// KEYS and ARGV, in the order and with the meaning of the script's header,
// and keys() and argv() send them in that order.
func TestScriptCallsFollowTheirHeaders(t *testing.T) {
	header := regexp.MustCompile(`(?m)^-- ((?:KEYS|ARGV)\[(\d+)\]) -> (.*)$`)
	for _, tt := range []struct {
		script string
		call   interface {
			keys() []string
			argv() []any
		}
	}{
		{"receipt.lua", receiptCall{}}, {"story.lua", storyCall{}}, {"delivery.lua", deliveryCall{}}, {"giveback.lua", givebackCall{}},
	} {
		t.Run(tt.script, func(t *testing.T) {
			src, err := fs.ReadFile(scriptFiles, tt.script)
			switch tt.script {
			case "receipt.lua":
				src, err = []byte(receiptParts.Contracts(scriptFiles)), nil
			case "story.lua":
				src, err = []byte(storyParts.Contracts(scriptFiles)), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := map[string]string{} // "KEYS[1]" -> its description
			for _, m := range header.FindAllStringSubmatch(string(src), -1) {
				lines[m[1]] = m[3]
			}
			// Give every field a value naming its slot, then read the
			// slots back from keys() and argv().
			v := reflect.New(reflect.TypeOf(tt.call)).Elem()
			var wantKeys, wantArgv []string
			for i := range v.NumField() {
				f := v.Type().Field(i)
				ref, desc, _ := strings.Cut(f.Tag.Get("lua"), " ")
				if strings.HasSuffix(ref, "..]") {
					// A list: the rest of ARGV, checked by its own test.
					if !strings.Contains(string(src), "-- "+ref+" -> "+desc) {
						t.Errorf("field %s says %s is %q; the header does not", f.Name, ref, desc)
					}
					continue
				}
				if got, ok := lines[ref]; !ok || !strings.HasPrefix(got, desc) {
					t.Errorf("field %s says %s is %q; the header says %q", f.Name, ref, desc, got)
				}
				delete(lines, ref)
				n, _ := strconv.Atoi(ref[5 : len(ref)-1])
				want := fmt.Sprint(n)
				switch f.Type.Kind() {
				case reflect.String:
					v.Field(i).SetString(want)
				case reflect.Int, reflect.Int64:
					v.Field(i).SetInt(int64(n))
				case reflect.Bool:
					v.Field(i).SetBool(true)
					want = "1"
				}
				if strings.HasPrefix(ref, "KEYS") {
					wantKeys = append(wantKeys, want)
				} else {
					wantArgv = append(wantArgv, want)
				}
			}
			for ref := range lines {
				t.Errorf("the header's %s has no field", ref)
			}
			call := v.Interface().(interface {
				keys() []string
				argv() []any
			})
			if got := call.keys(); fmt.Sprint(got) != fmt.Sprint(wantKeys) {
				t.Errorf("keys() = %v, want %v", got, wantKeys)
			}
			var gotArgv []string
			for _, a := range call.argv() {
				gotArgv = append(gotArgv, fmt.Sprint(a))
			}
			if fmt.Sprint(gotArgv) != fmt.Sprint(wantArgv) {
				t.Errorf("argv() = %v, want %v", gotArgv, wantArgv)
			}
		})
	}
}
