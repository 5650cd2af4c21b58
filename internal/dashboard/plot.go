package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// palette colours the series of a plot, in order.
var palette = []string{"#2b6cb0", "#d69e2e", "#38a169", "#c53030", "#805ad5", "#dd6b20", "#319795", "#b83280"}

// series is one stacked part of a bar plot.
type series struct {
	Name   string
	Values []float64 // one per bar
}

// plot is a stacked bar plot drawn as inline SVG by the server.
type plot struct {
	Title  string
	Labels []string // one per bar; "" leaves a bar unlabelled
	Series []series
	Unit   func(float64) string // the axis' and the tooltips' figures
	Empty  string               // shown instead when every value is 0
}

const (
	plotW, plotH        = 320, 150
	padL, padB, padT, r = 46, 18, 8, 4
	maxBar              = 24.0 // the widest bar
)

// svg draws p; every text in it is escaped.
func (p plot) svg() template.HTML {
	n := len(p.Labels)
	top := 0.0
	for i := 0; i < n; i++ {
		sum := 0.0
		for _, s := range p.Series {
			if i < len(s.Values) {
				sum += s.Values[i]
			}
		}
		top = math.Max(top, sum)
	}
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<figure class="plot"><figcaption>%s</figcaption>`, esc(p.Title))
	if n == 0 || top == 0 {
		fmt.Fprintf(&b, `<p class="muted">%s</p></figure>`, esc(p.Empty))
		return template.HTML(b.String())
	}
	top = niceCeil(top)
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`, plotW, plotH, esc(p.Title))
	h := float64(plotH - padB - padT)
	w := min(float64(plotW-padL-r)/float64(n), maxBar)
	for _, f := range []float64{0, 0.5, 1} {
		y := float64(padT) + h*(1-f)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ccc" stroke-width="1"/>`, padL, plotW-r, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="10" text-anchor="end" fill="#666">%s</text>`, padL-4, y+4, esc(p.Unit(top*f)))
	}
	for i := 0; i < n; i++ {
		x := float64(padL) + float64(i)*w
		y := float64(padT) + h
		for k, s := range p.Series {
			if i >= len(s.Values) || s.Values[i] <= 0 {
				continue
			}
			bh := h * s.Values[i] / top
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				x+w*0.1, y, w*0.8, bh, palette[k%len(palette)], esc(s.Name), esc(p.Labels[i]), esc(p.Unit(s.Values[i])))
		}
		if l := p.Labels[i]; l != "" && i%max(1, (n+5)/6) == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" text-anchor="middle" fill="#666">%s</text>`, x+w/2, plotH-6, esc(short(l)))
		}
	}
	b.WriteString(`</svg>`)
	if len(p.Series) > 1 {
		b.WriteString(`<ul class="legend">`)
		for k, s := range p.Series {
			fmt.Fprintf(&b, `<li><svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="%s"/></svg> %s</li>`, palette[k%len(palette)], esc(s.Name))
		}
		b.WriteString(`</ul>`)
	}
	b.WriteString(`</figure>`)
	return template.HTML(b.String())
}

// short keeps an axis label small: the part after the last space.
func short(l string) string {
	if i := strings.LastIndexByte(l, ' '); i >= 0 {
		return l[i+1:]
	}
	return l
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

func usdUnit(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.4f", v)
	case v < 10:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.0f", v)
}

func secondsUnit(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1fs", v)
	}
	return fmt.Sprintf("%.0fs", v)
}

func countUnit(v float64) string { return fmt.Sprintf("%.0f", v) }
