// Package promseries reads and writes series of values in the expanding
// notation of Prometheus's rule unit tests (`promtool test rules`,
// input_series), and turns a recording of the dispatcher's /metrics (the
// alert recorder, tools/cmd/alertrecord) into a test's input_series: sampled
// at the test's scrape interval, and, where an alert's window is longer than
// the recording, with a recorded stretch repeated.
//
// The notation, as promtool reads it: values separated by spaces; "_" a
// missing sample, "_xN" N of them; "axN" N+1 samples of a; "a+bxN" and
// "a-bxN" N+1 samples from a in steps of b.
package promseries

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Format writes vals (NaN for a missing sample) in the expanding notation,
// folding runs: equal values of any kind, steps only between integers (so
// that promtool's additions give back exactly the recorded values).
func Format(vals []float64) string {
	var out []string
	for i := 0; i < len(vals); {
		v := vals[i]
		if math.IsNaN(v) {
			j := i
			for j < len(vals) && math.IsNaN(vals[j]) {
				j++
			}
			if j-i == 1 {
				out = append(out, "_")
			} else {
				out = append(out, fmt.Sprintf("_x%d", j-i))
			}
			i = j
			continue
		}
		if j := i + 1; j < len(vals) && !math.IsNaN(vals[j]) {
			step := vals[j] - v
			if step == 0 || (isInt(v) && isInt(vals[j])) {
				for j+1 < len(vals) && !math.IsNaN(vals[j+1]) && vals[j+1]-vals[j] == step {
					j++
				}
				if j-i >= 2 {
					out = append(out, stepRun(v, step, j-i))
					i = j + 1
					continue
				}
			}
		}
		out = append(out, formatNum(v))
		i++
	}
	return strings.Join(out, " ")
}

func stepRun(v, step float64, n int) string {
	switch {
	case step == 0:
		return fmt.Sprintf("%sx%d", formatNum(v), n)
	case step > 0:
		return fmt.Sprintf("%s+%sx%d", formatNum(v), formatNum(step), n)
	default:
		return fmt.Sprintf("%s-%sx%d", formatNum(v), formatNum(-step), n)
	}
}

func isInt(v float64) bool { return v == math.Trunc(v) && math.Abs(v) < 1<<53 }

// formatNum never writes an exponent: promtool would read 1e+06+5x3 wrong.
func formatNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// ParseValues reads the expanding notation back; a missing sample is NaN.
// It reads what Format writes, and the rest of the notation but "stale".
func ParseValues(s string) ([]float64, error) {
	var out []float64
	for _, tok := range strings.Fields(s) {
		if tok == "_" {
			out = append(out, math.NaN())
			continue
		}
		base, times, expand := strings.Cut(tok, "x")
		if base == "" {
			return nil, fmt.Errorf("%q: no value before x", tok)
		}
		n := 0
		if expand {
			var err error
			if n, err = strconv.Atoi(times); err != nil || n < 1 {
				return nil, fmt.Errorf("%q: bad repeat count", tok)
			}
		}
		if base == "_" {
			if !expand {
				return nil, fmt.Errorf("%q: bad token", tok)
			}
			for range n {
				out = append(out, math.NaN())
			}
			continue
		}
		start, step := base, "0"
		// A sign after the first character splits a+b / a-b.
		if k := strings.IndexAny(base[1:], "+-"); k >= 0 && expand {
			start, step = base[:k+1], base[k+1:]
		}
		a, err := strconv.ParseFloat(start, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", tok, err)
		}
		b, err := strconv.ParseFloat(step, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", tok, err)
		}
		out = append(out, a)
		for range n {
			a += b
			out = append(out, a)
		}
	}
	return out, nil
}

// Recording is a recording written by the alert recorder
// (tools/cmd/alertrecord): header lines ("# ..."), then one line per series,
// "name{labels} values", a value per second from 0s.
type Recording struct {
	Header []string // without the leading "# "
	Series []Series
}

// Series is one recorded series.
type Series struct {
	Metric string    // name{labels}, as promtool's input_series take it
	Values []float64 // one a second; NaN where the scrape lacked it
}

// Every is the interval of a recording's values.
const Every = time.Second

// Parse reads a recording.
func Parse(r io.Reader) (*Recording, error) {
	rec := &Recording{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if h, ok := strings.CutPrefix(text, "#"); ok {
			rec.Header = append(rec.Header, strings.TrimSpace(h))
			continue
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		end := strings.LastIndex(text, "} ")
		if end < 0 {
			return nil, fmt.Errorf("line %d: want name{labels} values", line)
		}
		vals, err := ParseValues(text[end+2:])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rec.Series = append(rec.Series, Series{Metric: text[:end+1], Values: vals})
	}
	return rec, sc.Err()
}

// Window says which part of a recording a test replays, and how.
type Window struct {
	// Interval is the test's scrape interval (input_series' interval): a
	// value every Interval from From, taken from the recording.
	Interval time.Duration
	// From and Until bound the recorded part replayed: test time 0 is the
	// recording's From.
	From, Until time.Duration
	// Repeat, if set, continues the series after Until with the recorded
	// stretch from Repeat.From to Until over and over, until Repeat.Until
	// (test time, from From): an incident that goes on as it was recorded.
	// Counters (names ending _total, _bucket, _count, _sum) go on
	// counting: each repeat adds what the stretch added. A series missing
	// at the stretch's start (it appeared during it) holds its last value.
	Repeat *Repeat
	// Lead, if set, puts before the recorded part its first interval
	// (From to From+Interval) replayed for Lead: the traffic of the day
	// before an incident, as the recording began, for a rule comparing
	// with it (offset 1d). Test time 0 is then the lead's start, From's
	// value comes at Lead, and Repeat.Until counts from there. Counters
	// count at the first interval's pace throughout the lead, and the
	// recorded part goes on from the lead's count; a series missing at
	// From is missing throughout the lead.
	Lead time.Duration
	// LeadQuiet, with Lead, holds every counter at its first value
	// throughout the lead: a day before that counted nothing.
	LeadQuiet bool
}

// Repeat is a recorded stretch replayed again: from From (recording time)
// to the window's Until, until Until (test time).
type Repeat struct{ From, Until time.Duration }

// InputSeries is one entry of a test's input_series.
type InputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// InputSeries samples rec's series as w says, in rec's order.
func (rec *Recording) InputSeries(w Window) ([]InputSeries, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	var out []InputSeries
	for _, s := range rec.Series {
		if need := int(w.Until / Every); len(s.Values) <= need {
			return nil, fmt.Errorf("%s: recorded until %v, the window needs %v", s.Metric, time.Duration(len(s.Values)-1)*Every, w.Until)
		}
		var vals []float64
		at := func(t time.Duration) float64 { return s.Values[int(t/Every)] }
		lead, leadGain := w.lead(s.Metric, at)
		vals = append(vals, lead...)
		for t := w.From; t <= w.Until; t += w.Interval {
			vals = append(vals, at(t)+leadGain)
		}
		if r := w.Repeat; r != nil {
			var gain float64
			// A series that appeared during the stretch (missing at its
			// start) holds its last value in the repeats: nothing is made
			// up for it.
			hold := math.IsNaN(at(r.From))
			if !hold && math.IsNaN(at(w.Until)) {
				// Gone during the stretch: each repeat would be stale
				// throughout, which the recording never showed.
				return nil, fmt.Errorf("%s: present at %v, the repeat's start, and gone at %v, its end", s.Metric, r.From, w.Until)
			}
			if isCounter(s.Metric) && !hold {
				gain = at(w.Until) - at(r.From)
			}
			n := int((w.Until - r.From) / w.Interval) // samples a repeat adds
			for j := 0; w.Until-w.From+time.Duration(j+1)*w.Interval <= r.Until; j++ {
				k, q := j/n+1, j%n+1
				if hold {
					vals = append(vals, at(w.Until)+leadGain)
					continue
				}
				vals = append(vals, at(r.From+time.Duration(q)*w.Interval)+float64(k)*gain+leadGain)
			}
		}
		out = append(out, InputSeries{Series: s.Metric, Values: Format(vals)})
	}
	return out, nil
}

// lead returns a series' values in w's lead (none without one), and what
// its count gained there: what the recorded part's values are raised by.
func (w Window) lead(metric string, at func(time.Duration) float64) (vals []float64, gain float64) {
	n := int(w.Lead / w.Interval)
	first := at(w.From)
	var step float64
	if isCounter(metric) && !math.IsNaN(first) && !w.LeadQuiet {
		step = at(w.From+w.Interval) - first
	}
	for i := range n {
		vals = append(vals, first+float64(i)*step)
	}
	return vals, float64(n) * step
}

func (w Window) check() error {
	mult := func(d time.Duration) bool { return d%w.Interval == 0 }
	switch {
	case w.Interval <= 0 || w.Interval%Every != 0:
		return fmt.Errorf("interval %v: want a positive multiple of %v", w.Interval, Every)
	case w.From < 0 || w.Until < w.From || w.From%Every != 0 || !mult(w.Until-w.From):
		return fmt.Errorf("from %v until %v: want a span of whole intervals", w.From, w.Until)
	case w.Lead < 0 || !mult(w.Lead) || (w.Lead > 0 && w.Until == w.From):
		return fmt.Errorf("lead %v: want a whole number of intervals, and a recorded part of at least one", w.Lead)
	}
	if r := w.Repeat; r != nil {
		switch {
		case r.From < w.From || r.From >= w.Until || !mult(r.From-w.From):
			return fmt.Errorf("repeat from %v: want an interval of the replayed part before its end %v", r.From, w.Until)
		case r.Until < w.Until-w.From || !mult(r.Until):
			return fmt.Errorf("repeat until %v: want a whole number of intervals, past the replayed part", r.Until)
		}
	}
	return nil
}

// isCounter says whether a series counts (and so keeps counting when its
// recorded stretch repeats).
func isCounter(metric string) bool {
	name, _, _ := strings.Cut(metric, "{")
	for _, suffix := range []string{"_total", "_bucket", "_count", "_sum"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}
