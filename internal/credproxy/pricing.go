package credproxy

import (
	"regexp"
	"strings"
)

// Price is a model family's list price in USD per million tokens.
type Price struct {
	Input, Output float64
	// CacheWrite is the 5-minute cache write (usually 1.25× the input
	// price); CacheWrite1h the 1-hour one (2×); CacheRead a cache hit
	// (usually 0.1×).
	CacheWrite, CacheWrite1h, CacheRead float64
}

// Family is one model family of the pricing table. Long, when set, is the
// price of a request whose prompt (input, cache writes and cache reads)
// exceeds LongAbove tokens (the long-context rate).
type Family struct {
	Name      string
	Price     Price
	LongAbove int64
	Long      *Price
}

// WebSearchUSD is the price of one server-side web search.
const WebSearchUSD = 10.0 / 1000

// PricesAsOf is the date the pricing table was checked against Anthropic's
// published list prices (platform.claude.com/docs/en/about-claude/pricing
// and each model's page).
const PricesAsOf = "2026-11-26"

// price is a rate card with the usual cache ratios: 5-minute writes 1.25×
// the input price, 1-hour writes 2×, reads 0.1×.
func price(in, out float64) Price {
	return Price{Input: in, Output: out, CacheWrite: in * 1.25, CacheWrite1h: in * 2, CacheRead: in / 10}
}

// withRead is p with another cache read price.
func withRead(p Price, read float64) Price { p.CacheRead = read; return p }

// fastMultiplier is what a response served in fast mode (its usage says
// "speed": "fast") is charged over its family's rates: the highest
// multiplier Anthropic has published for fast mode, so fast mode is never
// under-counted.
const fastMultiplier = 6

// pricing is the one pricing table: every metered response is priced from
// it. A model is found by its family name (the API's model id without its
// date suffix, "-latest" or a "[…]" context marker, e.g.
// claude-sonnet-4-5-20250929 → claude-sonnet-4-5); a model not in the table
// is priced as the most expensive family (priciest).
var pricing = []Family{
	{Name: "claude-fable-5-1", Price: withRead(price(10, 50), 0.25)},
	{Name: "claude-mythos-5-1", Price: withRead(price(10, 50), 0.25)},
	{Name: "claude-fable-5", Price: withRead(price(10, 50), 1)},
	{Name: "claude-mythos-5", Price: withRead(price(10, 50), 1)},
	{Name: "claude-opus-5-5", Price: withRead(price(4, 20), 0.20)},
	{Name: "claude-opus-5", Price: price(5, 25)},
	{Name: "claude-opus-4-8", Price: price(5, 25)},
	{Name: "claude-opus-4-7", Price: price(5, 25)},
	{Name: "claude-opus-4-6", Price: price(5, 25)},
	{Name: "claude-opus-4-5", Price: price(5, 25)},
	{Name: "claude-opus-4-1", Price: price(15, 75)},
	{Name: "claude-opus-4", Price: price(15, 75)},
	{Name: "claude-opus-4-0", Price: price(15, 75)},
	{Name: "claude-3-opus", Price: price(15, 75)},
	// Sonnet 5.5's cache reads: its model page lists $0.20; a cut to $0.10
	// has been reported. The table keeps the higher figure.
	{Name: "claude-sonnet-5-5", Price: price(2, 10)},
	{Name: "claude-sonnet-5", Price: price(2, 10)},
	{Name: "claude-sonnet-4-6", Price: price(3, 15)},
	{Name: "claude-sonnet-4-5", Price: price(3, 15), LongAbove: 200_000, Long: ptr(price(6, 22.5))},
	{Name: "claude-sonnet-4", Price: price(3, 15), LongAbove: 200_000, Long: ptr(price(6, 22.5))},
	{Name: "claude-sonnet-4-0", Price: price(3, 15), LongAbove: 200_000, Long: ptr(price(6, 22.5))},
	{Name: "claude-3-7-sonnet", Price: price(3, 15)},
	{Name: "claude-3-5-sonnet", Price: price(3, 15)},
	{Name: "claude-haiku-5-5", Price: price(0.10, 0.50), LongAbove: 100_000, Long: ptr(price(0.50, 2.50))},
	{Name: "claude-haiku-4-5", Price: price(1, 5)},
	{Name: "claude-3-5-haiku", Price: price(0.8, 4)},
	{Name: "claude-3-haiku", Price: Price{Input: 0.25, Output: 1.25, CacheWrite: 0.30, CacheWrite1h: 0.50, CacheRead: 0.03}},
}

func ptr[T any](v T) *T { return &v }

var (
	families = func() map[string]*Family {
		m := make(map[string]*Family, len(pricing))
		for i := range pricing {
			m[pricing[i].Name] = &pricing[i]
		}
		return m
	}()
	// priciest is what a model missing from the table is priced as: the
	// family with the highest output price (then input price), its
	// long-context rate included.
	priciest = func() Family {
		best := pricing[0]
		for _, f := range pricing[1:] {
			if f.Price.Output > best.Price.Output || (f.Price.Output == best.Price.Output && f.Price.Input > best.Price.Input) {
				best = f
			}
		}
		return best
	}()
	// modelSuffix is what FamilyOf drops: a "[1m]"-style context marker,
	// then a date or "-latest".
	modelSuffix = regexp.MustCompile(`(-(\d{8}|latest))?(\[[^\]]*\])?$`)
)

// FamilyOf returns model's family and whether the table knows it; an unknown
// model gets priciest.
func FamilyOf(model string) (Family, bool) {
	m := modelSuffix.ReplaceAllString(strings.ToLower(strings.TrimSpace(model)), "")
	if f, ok := families[m]; ok {
		return *f, true
	}
	return priciest, false
}

// Tokens is one response's usage as the API reports it.
type Tokens struct {
	Input, Output int64
	// CacheWrite is every cache write; CacheWrite1h the part of it written
	// for an hour (priced higher), when the API says so.
	CacheWrite, CacheWrite1h int64
	CacheRead                int64
	WebSearches              int64
	// Fast says the response was served in fast mode.
	Fast bool
}

// Cost prices t as family f. Negative counts count as 0.
func (f Family) Cost(t Tokens) float64 {
	nz := func(n int64) float64 { return float64(max(n, 0)) }
	p := f.Price
	if f.Long != nil && max(t.Input, 0)+max(t.CacheWrite, 0)+max(t.CacheRead, 0) > f.LongAbove {
		p = *f.Long
	}
	w1h := min(max(t.CacheWrite1h, 0), max(t.CacheWrite, 0))
	w5m := nz(t.CacheWrite) - float64(w1h)
	tokens := (nz(t.Input)*p.Input + nz(t.Output)*p.Output + w5m*p.CacheWrite + float64(w1h)*p.CacheWrite1h +
		nz(t.CacheRead)*p.CacheRead) / 1e6
	if t.Fast {
		tokens *= fastMultiplier
	}
	return tokens + nz(t.WebSearches)*WebSearchUSD
}

// Worst is the most a request can cost as family f with a prompt of at
// most input tokens and an answer of at most output tokens: every prompt
// token written to the 1-hour cache (the dearest way to send one, at the
// long-context rate past its threshold) and every answer token produced.
// Web searches and fast mode are not in it (see reserve.go).
func (f Family) Worst(input, output int64) float64 {
	return f.Cost(Tokens{CacheWrite: input, CacheWrite1h: input, Output: output})
}
