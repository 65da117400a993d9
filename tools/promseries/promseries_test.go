package promseries

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var nan = math.NaN()

// same compares value lists, NaN equal to NaN.
func same(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) })
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		vals []float64
		want string
	}{
		{nil, ""},
		{[]float64{nan}, "_"},
		{[]float64{nan, nan, nan, 4}, "_x3 4"},
		{[]float64{0, 0, 0, 0}, "0x3"},
		{[]float64{1, 3, 5, 7, 8}, "1+2x3 8"},
		{[]float64{9, 7, 5}, "9-2x2"},
		{[]float64{1, 2}, "1 2"},
		{[]float64{7.2, 7.2, 7.2}, "7.2x2"},
		{[]float64{0.5, 0.6, 0.7}, "0.5 0.6 0.7"}, // a float step is not folded
		{[]float64{1e6, 1e6 + 5}, "1000000 1000005"},
		{[]float64{-3, -4, -5}, "-3-1x2"},
	} {
		if got := Format(tt.vals); got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.vals, got, tt.want)
		}
	}
}

// TestParseValuesReadsPromtoolsNotation: the examples of Prometheus's
// unit-testing documentation.
func TestParseValuesReadsPromtoolsNotation(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []float64
	}{
		{"1+2x3", []float64{1, 3, 5, 7}},
		{"1-2x4", []float64{1, -1, -3, -5, -7}},
		{"1x4", []float64{1, 1, 1, 1, 1}},
		{"1 _x3 stale", nil}, // stale is not read: an error below
		{"x3", nil},          // no value to repeat
		{"1 x", nil},
		{"_x3", []float64{nan, nan, nan}},
		{"-2+4x1", []float64{-2, 2}},
		{"0.5 _ 3", []float64{0.5, nan, 3}},
	} {
		got, err := ParseValues(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("ParseValues(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !same(got, tt.want) {
			t.Errorf("ParseValues(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		vals := make([]float64, r.IntN(40))
		v := float64(r.IntN(100))
		for i := range vals {
			switch r.IntN(6) {
			case 0:
				vals[i] = nan
				continue
			case 1:
				v += 0.25 * float64(r.IntN(8)) // a gauge's fractions
			case 2, 3:
				v += float64(r.IntN(3)) // a counter's steady steps
			}
			vals[i] = v
		}
		got, err := ParseValues(Format(vals))
		if err != nil || !same(got, vals) {
			t.Fatalf("%v -> %q -> %v, %v", vals, Format(vals), got, err)
		}
	}
}

const sample = `# a run
# second header line
c_total{pod="a"} 0+10x9
g{pod="a"} 1 1 2 2 3 3 4 4 5 5
late_total{pod="b"} _x3 1x6
`

func TestParse(t *testing.T) {
	rec, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Header) != 2 || rec.Header[0] != "a run" || len(rec.Series) != 3 {
		t.Fatalf("header %q, %d series", rec.Header, len(rec.Series))
	}
	if s := rec.Series[2]; s.Metric != `late_total{pod="b"}` || !same(s.Values, []float64{nan, nan, nan, 1, 1, 1, 1, 1, 1, 1}) {
		t.Fatalf("series %+v", s)
	}
	if _, err := Parse(strings.NewReader("no_labels 1 2\n")); err == nil {
		t.Fatal("a line without labels: want an error")
	}
}

func TestInputSeries(t *testing.T) {
	rec, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	got, err := rec.InputSeries(Window{Interval: 2 * time.Second, From: 2 * time.Second, Until: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []InputSeries{
		{`c_total{pod="a"}`, "20+20x3"},
		{`g{pod="a"}`, "2+1x3"},
		{`late_total{pod="b"}`, "_ 1x2"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}

	// The stretch 4s-8s repeats until 16s of test time (from 2s): a
	// counter goes on adding what the stretch added (40 each time), a
	// gauge repeats its values.
	got, err = rec.InputSeries(Window{Interval: 2 * time.Second, From: 2 * time.Second, Until: 8 * time.Second,
		Repeat: &Repeat{From: 4 * time.Second, Until: 16 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	wantVals := map[string][]float64{
		`c_total{pod="a"}`:    {20, 40, 60, 80, 100, 120, 140, 160, 180},
		`g{pod="a"}`:          {2, 3, 4, 5, 4, 5, 4, 5, 4},
		`late_total{pod="b"}`: {nan, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	for _, s := range got {
		vals, err := ParseValues(s.Values)
		if err != nil || !same(vals, wantVals[s.Series]) {
			t.Errorf("%s: %q = %v, want %v", s.Series, s.Values, vals, wantVals[s.Series])
		}
	}

	// A lead of 6s: the first interval (2s-4s) three times before the
	// recorded part; a counter counts at its pace (20 an interval) and the
	// recorded part goes on from there, a gauge holds its first value, a
	// series missing at From is missing in the lead.
	got, err = rec.InputSeries(Window{Interval: 2 * time.Second, From: 2 * time.Second, Until: 8 * time.Second, Lead: 6 * time.Second,
		Repeat: &Repeat{From: 6 * time.Second, Until: 8 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	wantVals = map[string][]float64{
		`c_total{pod="a"}`:    {20, 40, 60, 80, 100, 120, 140, 160},
		`g{pod="a"}`:          {2, 2, 2, 2, 3, 4, 5, 5},
		`late_total{pod="b"}`: {nan, nan, nan, nan, 1, 1, 1, 1},
	}
	for _, s := range got {
		vals, err := ParseValues(s.Values)
		if err != nil || !same(vals, wantVals[s.Series]) {
			t.Errorf("lead: %s: %q = %v, want %v", s.Series, s.Values, vals, wantVals[s.Series])
		}
	}

	// A quiet lead: every counter holds its first value, a day that
	// counted nothing.
	got, err = rec.InputSeries(Window{Interval: 2 * time.Second, From: 2 * time.Second, Until: 4 * time.Second, Lead: 4 * time.Second, LeadQuiet: true})
	if err != nil {
		t.Fatal(err)
	}
	wantVals = map[string][]float64{
		`c_total{pod="a"}`:    {20, 20, 20, 40},
		`g{pod="a"}`:          {2, 2, 2, 3},
		`late_total{pod="b"}`: {nan, nan, nan, 1},
	}
	for _, s := range got {
		vals, err := ParseValues(s.Values)
		if err != nil || !same(vals, wantVals[s.Series]) {
			t.Errorf("quiet lead: %s: %q = %v, want %v", s.Series, s.Values, vals, wantVals[s.Series])
		}
	}

	// A series that appears during the stretch holds its last value.
	got, err = rec.InputSeries(Window{Interval: 2 * time.Second, Until: 8 * time.Second, Repeat: &Repeat{Until: 12 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Values != "_x2 1x4" {
		t.Errorf("late_total repeated from before it appeared: %q, want _x2 1x4", got[2].Values)
	}

	// A series gone by the end of the stretch it would repeat: an error,
	// not repeats that are stale throughout.
	gone, err := Parse(strings.NewReader("gone_total{pod=\"a\"} 1+1x4 _x5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := gone.InputSeries(Window{Interval: 2 * time.Second, Until: 8 * time.Second, Repeat: &Repeat{From: 2 * time.Second, Until: 16 * time.Second}}); err == nil {
		t.Errorf("a series gone at the stretch's end: %q, want an error", got)
	}

	for _, w := range []Window{
		{Interval: 1500 * time.Millisecond, Until: 3 * time.Second},                                  // not whole seconds
		{Interval: 2 * time.Second, From: 2 * time.Second, Until: 7 * time.Second},                   // not whole intervals
		{Interval: 2 * time.Second, Until: 12 * time.Second},                                         // past the recording
		{Interval: 2 * time.Second, Until: 8 * time.Second, Repeat: &Repeat{From: 8 * time.Second}},  // an empty stretch
		{Interval: 2 * time.Second, Until: 8 * time.Second, Repeat: &Repeat{From: 3 * time.Second}},  // off the intervals
		{Interval: 2 * time.Second, Until: 8 * time.Second, Repeat: &Repeat{Until: 4 * time.Second}}, // ends before the recording
		{Interval: 2 * time.Second, Until: 8 * time.Second, Lead: 3 * time.Second},                   // a lead off the intervals
	} {
		if _, err := rec.InputSeries(w); err == nil {
			t.Errorf("%+v: want an error", w)
		}
	}
}
