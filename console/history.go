package console

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"smsdispatcher/status"
)

// The chart: at most the last hour, at least the last chartMinSpan (the
// span the history holds, so that the first minutes are not a sliver), in
// chartBuckets buckets.
const (
	chartSpan    = time.Hour
	chartMinSpan = 2 * time.Minute
	chartBuckets = 120
	chartWidth   = 720
	chartHeight  = 180
	ratioHeight  = 60 // the delivered ratio's strip, 0-100 %
	penaltyRow   = 14 // an account's row of 429 penalties
)

// history is what the overview's chart draws: the units sent each second
// per class (every account's summed), the deliveries denied each second
// per class (every process's and account's summed), and at each reading
// the delivered ratio per class and the accounts in a 429's penalty. The
// handler's sampler fills it (Handler.sample), a reading every few
// seconds whether or not anyone looks; each reading holds the last 60 s
// of sends second by second, so the chart has no gap but where Redis did
// not answer for a minute. It keeps the last hour, in memory: a console
// restarted starts empty.
//
// The 429s are an account's, not a class's: a provider answers 429 to an
// account, and its penalty stops every class on it; no process records
// which class's send drew it. So they are kept, and drawn, per account.
//
// The denials are counts each process keeps since it started and tells in
// its heartbeat (status.Process.Denied): what a process denied between two
// readings is the difference of its counts, spread evenly over the seconds
// between them; a process first listed after the first reading started
// since (or had denied nothing), and all its count is new. A second's
// denials are only ever added to: a process that ends (its registry entry
// gone 30 s after its last beat) adds nothing more, and what it told
// before stays.
type history struct {
	mu        sync.Mutex
	sent      map[int64]map[string]int     // unix second -> class -> units
	denied    map[int64]map[string]float64 // unix second -> class -> deliveries denied
	delivered map[int64]map[string]float64 // unix second of a reading -> class -> ratio
	throttled map[int64][]string           // unix second of a reading -> the accounts in a 429's penalty
	told      map[processCount]toldCount   // each process's denials at the last reading that listed them
	last      time.Time                    // the latest reading's time; zero before the first
	readings  int
}

// processCount names the count of a process's denials on an account of a
// class.
type processCount struct{ process, account, class string }

// toldCount is a processCount's count at the last reading that listed it.
type toldCount struct {
	n  int64
	at time.Time
}

func newHistory() *history {
	return &history{sent: map[int64]map[string]int{}, denied: map[int64]map[string]float64{},
		delivered: map[int64]map[string]float64{}, throttled: map[int64][]string{}, told: map[processCount]toldCount{}}
}

// add takes in one report.
func (h *history) add(rep status.Report) {
	// The report's seconds end with the whole second before its time.
	last := rep.Time.Truncate(time.Second).Add(-time.Second).Unix()
	sent := map[int64]map[string]int{}
	finals, delivered := map[string]int64{}, map[string]int64{}
	var throttled []string
	for _, a := range rep.Accounts {
		for class, s := range a.Sent {
			for i, n := range s.PerSecond {
				sec := last - int64(len(s.PerSecond)-1-i)
				if sent[sec] == nil {
					sent[sec] = map[string]int{}
				}
				sent[sec][class] += n
			}
		}
		for class, d := range a.Delivery {
			finals[class] += d.Finals
			delivered[class] += d.Delivered
		}
		if a.Penalty != nil && a.Penalty.Reason == "429" {
			throttled = append(throttled, a.Name)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addDenied(rep)
	h.readings++
	// A later reading of a second is at least as complete as an earlier.
	for sec, byClass := range sent {
		h.sent[sec] = byClass
	}
	ratios := map[string]float64{}
	for class, f := range finals {
		if f > 0 {
			ratios[class] = float64(delivered[class]) / float64(f)
		}
	}
	now := rep.Time.Unix()
	h.delivered[now], h.throttled[now] = ratios, throttled
	cut := rep.Time.Add(-chartSpan).Unix()
	for sec := range h.sent {
		if sec < cut {
			delete(h.sent, sec)
		}
	}
	for sec := range h.delivered {
		if sec < cut {
			delete(h.delivered, sec)
			delete(h.throttled, sec)
		}
	}
	for sec := range h.denied {
		if sec < cut {
			delete(h.denied, sec)
		}
	}
	for k, c := range h.told {
		if c.at.Unix() < cut {
			delete(h.told, k)
		}
	}
}

// addDenied takes in rep's processes' denials: what each denied since the
// previous reading, spread over the seconds since it (at most the last
// hour). The first reading only learns the counts: what they hold was
// denied before the console looked. h.mu is held.
func (h *history) addDenied(rep status.Report) {
	denied := map[string]int64{} // class -> deliveries denied since the previous reading
	for _, a := range rep.Accounts {
		for _, p := range a.Processes {
			for class, n := range p.Denied {
				k := processCount{p.ID, a.Name, class}
				before, known := h.told[k]
				if known || h.readings > 0 {
					denied[class] += max(n-before.n, 0)
				}
				h.told[k] = toldCount{max(n, before.n), rep.Time}
			}
		}
	}
	to := rep.Time.Unix()
	from := max(min(h.last.Unix(), to-1), rep.Time.Add(-chartSpan).Unix())
	for class, n := range denied {
		each := float64(n) / float64(to-from)
		for sec := from; sec < to; sec++ {
			if h.denied[sec] == nil {
				h.denied[sec] = map[string]float64{}
			}
			h.denied[sec][class] += each
		}
	}
	if rep.Time.After(h.last) {
		h.last = rep.Time
	}
}

// chartView is the chart as the template draws it.
type chartView struct {
	Width, Height int
	Readings      int
	Series        []series
	ContractY     int     // the contract line's height
	Contract      float64 // units per second, every account's
	MaxRPS        float64 // the top of the scale
	RatioHeight   int     // the delivered ratio's strip, on its own 0-100 % scale
	Penalties     []accountPenalties
	PenaltyHeight int
	Last60s       []classCount
	Updated       time.Time // the latest reading's time: a sampler that stopped reading shows
	SpanMinutes   int       // the span drawn
	BucketSeconds int
	SampleSeconds float64 // how often the sampler reads (the handler sets it)
}

type series struct {
	Class     string
	Color     string
	Sent      string // the polyline's points: units per second
	Denied    string // the polyline's points: deliveries denied per second
	Delivered string // the delivered ratio's points, on the ratio strip's 0-100 % scale
	Ratio     string // the last delivered ratio, "" none
}

// accountPenalties is an account's row of 429 penalties: the x of each
// bucket with a reading that found it in one.
type accountPenalties struct {
	Account string
	Y       int // the row's top
	X       []int
}

type classCount struct {
	Class  string
	Units  int // sent
	Denied int // deliveries denied
}

// palette colours the classes in their order.
var palette = []string{"#d1495b", "#2e86ab", "#66a182", "#edae49", "#8e6c8a"}

// view draws the last hour up to now for classes and accounts, against
// contract units per second.
func (h *history) view(now time.Time, classes, accounts []string, contract float64) chartView {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := now.Truncate(time.Second).Unix()
	oldest := end
	for sec := range h.sent {
		oldest = min(oldest, sec)
	}
	span := min(max(time.Duration(end-oldest)*time.Second, chartMinSpan), chartSpan)
	buckets := chartBuckets
	per := int64(span/time.Second) / int64(buckets)
	start := end - int64(buckets)*per
	v := chartView{Width: chartWidth, Height: chartHeight, RatioHeight: ratioHeight, Readings: h.readings, Contract: contract, Updated: h.last.UTC(),
		SpanMinutes: int(span / time.Minute), BucketSeconds: int(per), PenaltyHeight: penaltyRow * len(accounts)}
	rates, deniedRates := make([][]float64, len(classes)), make([][]float64, len(classes))
	for ci, class := range classes {
		rates[ci], deniedRates[ci] = make([]float64, buckets), make([]float64, buckets)
		for b := range buckets {
			sum, denied := 0, 0.0
			for sec := start + int64(b)*per; sec < start+int64(b+1)*per; sec++ {
				sum += h.sent[sec][class]
				denied += h.denied[sec][class]
			}
			rates[ci][b], deniedRates[ci][b] = float64(sum)/float64(per), denied/float64(per)
			v.MaxRPS = max(v.MaxRPS, rates[ci][b], deniedRates[ci][b])
		}
		c := classCount{Class: class}
		denied := 0.0
		for sec := end - 60; sec < end; sec++ {
			c.Units += h.sent[sec][class]
			denied += h.denied[sec][class]
		}
		c.Denied = int(math.Round(denied))
		v.Last60s = append(v.Last60s, c)
	}
	v.MaxRPS = max(v.MaxRPS, contract, 1) * 1.1
	y := func(rps float64) int { return chartHeight - int(rps/v.MaxRPS*chartHeight) }
	x := func(b int) int { return b * chartWidth / buckets }
	v.ContractY = y(contract)
	readings := slices.Sorted(func(yield func(int64) bool) {
		for sec := range h.delivered {
			if sec >= start && !yield(sec) {
				return
			}
		}
	})
	for ci, class := range classes {
		var sent, denied, deliv strings.Builder
		for b, r := range rates[ci] {
			fmt.Fprintf(&sent, "%d,%d ", x(b), y(r))
			fmt.Fprintf(&denied, "%d,%d ", x(b), y(deniedRates[ci][b]))
		}
		s := series{Class: class, Color: palette[ci%len(palette)], Sent: sent.String(), Denied: denied.String()}
		for _, sec := range readings {
			if r, ok := h.delivered[sec][class]; ok {
				fmt.Fprintf(&deliv, "%d,%d ", x(int((sec-start)/per)), ratioHeight-int(r*ratioHeight))
				s.Ratio = fmt.Sprintf("%.1f %%", r*100)
			}
		}
		s.Delivered = deliv.String()
		v.Series = append(v.Series, s)
	}
	for i, account := range accounts {
		p := accountPenalties{Account: account, Y: i * penaltyRow}
		for _, sec := range readings {
			if xb := x(int((sec - start) / per)); slices.Contains(h.throttled[sec], account) && !slices.Contains(p.X, xb) {
				p.X = append(p.X, xb)
			}
		}
		v.Penalties = append(v.Penalties, p)
	}
	return v
}
