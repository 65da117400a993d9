package loadharness

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
)

// Chart geometry, in SVG user units.
const (
	svgWidth   = 960
	svgLeft    = 70 // room for the y axis and its label
	svgRight   = 150
	svgHeader  = 64
	svgPanelH  = 200
	svgPlotTop = 30 // from a panel's top to its plot
	svgPlotH   = 130
	svgFooter  = 40
)

// contractPer100ms is the contract line of the chart: 100/s is 10 per 100 ms.
const contractPer100ms = contractRPS / 10

// writeSVG draws, for cfg.svgMode and cfg.svgSenders, one panel per strategy:
// requests per 100 ms at the provider over the run, accepted and rejected
// stacked, against the contract line of 10 per 100 ms. Each panel has its
// own y scale, labelled, so a quiet strategy is not flattened by a loud one.
func writeSVG(w io.Writer, cfg *Config, rows []*result) error {
	var panels []*result
	for _, r := range rows {
		if r.Mode == cfg.svgMode && r.Senders == cfg.svgSenders {
			panels = append(panels, r)
		}
	}
	if len(panels) == 0 {
		return fmt.Errorf("no run of mode %s with K=%d to draw", cfg.svgMode, cfg.svgSenders)
	}
	b := bufio.NewWriter(w)
	height := svgHeader + len(panels)*svgPanelH + svgFooter
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", svgLeft,
		esc(fmt.Sprintf("Requests per 100 ms at the provider: mode %s, K=%d senders, clock skew %v", cfg.svgMode, cfg.svgSenders, cfg.skew)))
	fmt.Fprintf(b, `<text x="%d" y="44" fill="#444">%s</text>`+"\n", svgLeft,
		esc(fmt.Sprintf("contract %d/s = %d per 100 ms (red line); TARGET_RPS %g; OTP %g/s; one panel per strategy, each with its own y scale",
			contractRPS, contractPer100ms, cfg.target, cfg.otpRate)))
	legendX := svgWidth - svgRight + 16
	fmt.Fprintf(b, `<rect x="%d" y="14" width="12" height="12" fill="#3a8f5c"/><text x="%d" y="24">accepted</text>`+"\n", legendX, legendX+18)
	fmt.Fprintf(b, `<rect x="%d" y="34" width="12" height="12" fill="#d0463c"/><text x="%d" y="44">rejected (429, 5xx)</text>`+"\n", legendX, legendX+18)
	for i, r := range panels {
		drawPanel(b, r, svgHeader+i*svgPanelH)
	}
	x0, x1 := svgLeft, svgWidth-svgRight
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">seconds since the run's start</text>`+"\n", (x0+x1)/2, height-10)
	fmt.Fprintln(b, `</svg>`)
	return b.Flush()
}

// drawPanel draws one strategy's histogram with its top at top.
func drawPanel(b *bufio.Writer, r *result, top int) {
	x0, x1 := float64(svgLeft), float64(svgWidth-svgRight)
	yTop := float64(top + svgPlotTop)
	yBot := yTop + svgPlotH
	bins := len(r.AcceptedPer100ms) - 1 // the last bin holds late finishers; leave it out
	if bins < 1 {
		return
	}
	peak := 0
	for i := range bins {
		peak = max(peak, r.AcceptedPer100ms[i]+r.RejectedPer100ms[i])
	}
	yMax := niceCeil(max(float64(peak), 1.5*contractPer100ms))
	y := func(v float64) float64 { return yBot - v/yMax*svgPlotH }
	barW := (x1 - x0) / float64(bins)

	title := r.Strategy
	if r.Burst > 0 {
		title += fmt.Sprintf(" (BURST %d)", r.Burst)
	}
	suspended := "never suspended"
	if r.SuspendAfterS != nil {
		suspended = "suspended in " + r.suspendText()
	}
	title += fmt.Sprintf(": %d 429s, %s; max accepted in any 100 ms %d, in any 1 s %d; %.1f sent/s",
		r.Answered, suspended, r.MaxAccepted100ms, r.MaxAccepted1s, r.AcceptedRPS)
	fmt.Fprintf(b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top+18, esc(title))

	// Axes, y ticks and grid.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, yTop, x0, yBot)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, yBot, x1, yBot)
	for _, v := range []float64{0, yMax / 2, yMax} {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y(v), x1, y(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%g</text>`+"\n", x0-6, y(v)+4, v)
	}
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" fill="#444">per 100 ms</text>`+"\n", x0-42, (yTop+yBot)/2)
	for s := 0; s*10 <= bins; s++ {
		x := x0 + float64(s*10)*barW
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, yBot, x, yBot+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, yBot+16, s)
	}

	// Bars: accepted from the axis, rejected stacked on top.
	for i := range bins {
		acc, rej := float64(r.AcceptedPer100ms[i]), float64(r.RejectedPer100ms[i])
		x := x0 + float64(i)*barW
		if acc > 0 {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3a8f5c"/>`+"\n", x+0.5, y(acc), barW-1, yBot-y(acc))
		}
		if rej > 0 {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d0463c"/>`+"\n", x+0.5, y(acc+rej), barW-1, y(acc)-y(acc+rej))
		}
	}

	// The contract line.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-width="1.5" stroke-dasharray="6 3"/>`+"\n",
		x0, y(contractPer100ms), x1, y(contractPer100ms))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#c00">contract: %d / 100 ms</text>`+"\n", x1+6, y(contractPer100ms)+4, contractPer100ms)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func esc(s string) string { return html.EscapeString(s) }
