package credproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/rules"
)

// The proxy is the meter: every response that passes through it is read for
// its usage (the JSON body's, or the SSE stream's message_start and
// message_delta), priced from pricing, and committed to the Ledger as the
// response ends, one row per request. A response that ends without its final
// usage (a stream cut before message_delta, a JSON body cut before its
// usage) is charged for what it carried (estimateOutput). Before a Messages
// API request is forwarded, the Ledger is asked whether the group may spend,
// and the request reserves its worst case (reserve.go): a group at its daily
// budget is answered 429 in the API's own shape, so the turn in flight ends
// at that request; a group whose requests in flight hold what is left of it
// is answered 429 too, with a Retry-After.

// Metered is one response's usage, priced.
type Metered struct {
	At      time.Time
	Model   string // as the upstream named it
	Tokens  Tokens
	CostUSD float64
}

// Allowance is what the ledger knows of a group's money today.
type Allowance struct {
	BudgetUSD float64 // the daily budget; 0: none
	SpentUSD  float64 // what the ledger has of today's spending
}

// Ledger is where the metered usage goes and what decides whether a group
// may spend more. Its methods are called on the request's goroutine.
type Ledger interface {
	// Admit is asked before a Messages API request of group is forwarded:
	// a refusal's message when the group has used its daily budget up, ""
	// otherwise, with the group's budget and spending today (the proxy
	// adds what its requests in flight hold). Admissions of one group are
	// never asked at once.
	Admit(ctx context.Context, group string) (Allowance, string)
	// Commit records one response's metered usage; it returns once the
	// record is durable.
	Commit(ctx context.Context, group string, m Metered) error
}

// commitTimeout bounds one ledger commit; the response has been served by
// then, so a caller that went away does not cancel it.
const commitTimeout = 30 * time.Second

// admit asks the ledger whether group may send a Messages API request and
// reserves the request's worst case (reserve.go); it answers a refusal
// itself and reports false. The hold (nil when nothing is metered) is to be
// settled when the request ends.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, group string) (*hold, bool) {
	l := p.ledger
	if l == nil || r.URL.Path != "/v1/messages" {
		return nil, true // count_tokens is free
	}
	est, body := p.peek(r)
	if body != nil && body.err != nil {
		return nil, true // the body failed: the request fails on it, unsent
	}
	pu := p.purse(group)
	pu.mu.Lock()
	allow, msg := l.Admit(r.Context(), group)
	held, inFlight := pu.held(), pu.inFlight
	wait := msg == "" && rules.BudgetHeld(allow.BudgetUSD, allow.SpentUSD, held)
	var h *hold
	if msg == "" && !wait {
		h = &hold{pu: pu, usd: est.usd, model: est.model, body: body}
		pu.reserved += est.usd
		pu.inFlight++
	}
	pu.mu.Unlock()
	p.mu.Lock()
	was := p.refusing[group]
	if msg == "" {
		delete(p.refusing, group)
	} else {
		p.refusing[group] = true
	}
	p.mu.Unlock()
	if wait {
		p.lim.warn(p.log, group, reasonHeld, func(e *zerolog.Event) {
			e.Str("group", group).Float64("budget_usd", allow.BudgetUSD).Float64("spent_usd", allow.SpentUSD).
				Float64("held_usd", held).Int("in_flight", inFlight).Float64("reserve_usd", est.usd)
		}, "API request refused: the group's requests in flight hold what is left of its daily budget")
		w.Header().Set("Retry-After", BudgetRetryAfter)
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf(
			"bridged: this chat's API requests in flight may use up what is left of its daily budget (%s spent of %s today, up to %s held by %d requests in flight); send this one again when they end",
			rules.FormatUSD(allow.SpentUSD), rules.FormatUSD(allow.BudgetUSD), rules.FormatUSD(held), inFlight))
		return nil, false
	}
	if msg == "" {
		return h, true
	}
	// One line when a group starts being refused, not one per request.
	ev := p.log.Debug()
	if !was {
		ev = p.log.Warn()
	}
	ev.Str("group", group).Str("reason", msg).Msg("API request refused: daily budget used up")
	// The SDK the CLI is built on does not retry what says so.
	w.Header().Set("X-Should-Retry", "false")
	writeError(w, http.StatusTooManyRequests, "rate_limit_error", msg)
	return nil, false
}

// meter reads usage out of a response body while passing it through
// untouched, and commits it when the body ends or is closed.
type meter struct {
	rc    io.ReadCloser
	sse   bool
	p     *Proxy
	group string
	line  []byte // SSE: the partial line
	whole []byte // JSON: the body so far (bounded)
	model string
	tok   Tokens
	live  Tokens // what the live tally has of tok
	seen  bool   // a usage was read
	big   bool   // the JSON body outgrew maxMeteredJSON
	once  sync.Once
	// hold is the request's reservation, settled at the commit (nil: no
	// ledger).
	hold *hold
	// final: a message_delta's usage was read (the stream's last word on
	// its output).
	final bool
	// carried is the size of the content a stream's deltas carried
	// (their text, JSON or thinking, as sent); bytes the size of the
	// whole body.
	carried, bytes int64
	estimated      bool // some of tok is estimateOutput's, not the API's
}

// The output of a response that ends without its final usage is estimated
// from what it carried: one token per estimateBytesPerToken bytes of the
// content of a stream's deltas (as sent, escapes included), or of a JSON
// body; a JSON body's prompt, which it reports only at its end, at one
// token per estimatePromptBytesPerToken bytes of the request body. Claude's
// tokens average 3.5 to 4 bytes of English and about 3 of code or of
// non-Latin text, so the estimate is above what most answers were billed.
const (
	estimateBytesPerToken       = 3
	estimatePromptBytesPerToken = 4
)

const maxMeteredJSON = 4 << 20

func (m *meter) Read(b []byte) (int, error) {
	n, err := m.rc.Read(b)
	if n > 0 {
		m.bytes += int64(n)
		m.feed(b[:n])
	}
	if err == io.EOF {
		m.finish()
	}
	return n, err
}

// Close commits what was metered (a stream cut short is charged for what
// it carried).
func (m *meter) Close() error {
	err := m.rc.Close()
	m.finish()
	return err
}

func (m *meter) feed(b []byte) {
	if !m.sse {
		if len(m.whole)+len(b) <= maxMeteredJSON {
			m.whole = append(m.whole, b...)
		} else {
			m.big = true
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(m.line)+len(b) <= maxMeteredJSON {
				m.line = append(m.line, b...)
			}
			return
		}
		if len(m.line) == 0 {
			m.event(b[:i]) // the whole line is in b: no copy
		} else {
			m.line = append(m.line, b[:i]...)
			m.event(m.line)
			m.line = m.line[:0]
		}
		b = b[i+1:]
	}
}

type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	ServerToolUse *struct {
		WebSearchRequests int64 `json:"web_search_requests"`
	} `json:"server_tool_use"`
	Speed string `json:"speed"` // "fast" in fast mode
}

// merge takes u's counts where they exceed what is known: the API's counts
// are cumulative (message_delta repeats or raises message_start's).
func (t *Tokens) merge(u *apiUsage) {
	t.Input = max(t.Input, u.InputTokens)
	t.Output = max(t.Output, u.OutputTokens)
	t.CacheWrite = max(t.CacheWrite, u.CacheCreationInputTokens)
	t.CacheRead = max(t.CacheRead, u.CacheReadInputTokens)
	if u.CacheCreation != nil {
		t.CacheWrite1h = max(t.CacheWrite1h, u.CacheCreation.Ephemeral1h)
	}
	if u.ServerToolUse != nil {
		t.WebSearches = max(t.WebSearches, u.ServerToolUse.WebSearchRequests)
	}
	if u.Speed == "fast" {
		t.Fast = true
	}
}

var (
	sseData      = []byte("data:")
	sseUsageHint = []byte(`"usage"`)
	sseDelta     = []byte(`"content_block_delta"`)
	// deltaKeys name what a content delta carries: text, a tool call's
	// JSON, thinking.
	deltaKeys = [][]byte{[]byte(`"text":"`), []byte(`"partial_json":"`), []byte(`"thinking":"`)}
)

// deltaSize is the size of what a content_block_delta's data carries: its
// string as sent, up to the line's end less the closing `"}}`.
func deltaSize(data []byte) int64 {
	for _, k := range deltaKeys {
		if i := bytes.Index(data, k); i >= 0 {
			rest := bytes.TrimRight(data[i+len(k):], " \t")
			return int64(max(len(rest)-3, 0))
		}
	}
	return 0
}

// event handles one SSE line: message_start carries the model and the
// input usage, message_delta the output (and, cumulative, any updated
// input) usage. Only data lines with a usage are decoded.
func (m *meter) event(line []byte) {
	line = bytes.TrimRight(line, "\r")
	data, ok := bytes.CutPrefix(line, sseData)
	if !ok {
		return
	}
	if bytes.Contains(data, sseDelta) {
		m.carried += deltaSize(data)
	}
	if !bytes.Contains(data, sseUsageHint) {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Model string    `json:"model"`
			Usage *apiUsage `json:"usage"`
		} `json:"message"`
		Usage *apiUsage `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			m.model = ev.Message.Model
			if ev.Message.Usage != nil {
				m.tok.merge(ev.Message.Usage)
				m.seen = true
			}
		}
	case "message_delta":
		if ev.Usage != nil {
			m.tok.merge(ev.Usage)
			m.seen, m.final = true, true
		}
	}
	m.tally(0)
}

// tally adds to the group's live tally what it does not have yet.
func (m *meter) tally(cost float64) {
	d := Usage{
		InputTokens:              m.tok.Input - m.live.Input,
		OutputTokens:             m.tok.Output - m.live.Output,
		CacheCreationInputTokens: m.tok.CacheWrite - m.live.CacheWrite,
		CacheReadInputTokens:     m.tok.CacheRead - m.live.CacheRead,
		CostUSD:                  cost,
	}
	m.live = m.tok
	m.p.add(m.group, d)
}

// finish reads a JSON body's usage, prices what was metered and commits
// it, once.
func (m *meter) finish() {
	m.once.Do(func() {
		if !m.sse {
			var body struct {
				Model string    `json:"model"`
				Usage *apiUsage `json:"usage"`
			}
			if json.Unmarshal(m.whole, &body) == nil && body.Usage != nil {
				m.model = body.Model
				m.tok.merge(body.Usage)
				m.seen, m.final = true, true
			}
			m.whole = nil
		}
		m.estimateOutput()
		if !m.seen {
			if m.big {
				m.p.log.Warn().Str("group", m.group).Int("cap_bytes", maxMeteredJSON).Msg("a response too large to read its usage passed unmetered")
			}
			return
		}
		fam, known := FamilyOf(m.model)
		if !known {
			m.p.unknownModel(m.model, fam)
		}
		cost := fam.Cost(m.tok)
		m.tally(cost)
		if m.estimated {
			m.p.log.Info().Str("group", m.group).Str("model", m.model).Int64("output_tokens", m.tok.Output).Float64("cost_usd", cost).
				Msg("API response ended without its usage: charged for what it carried")
		}
		l := m.p.ledger
		if l == nil {
			return
		}
		// The charge takes the reservation's place before it is in the
		// ledger, and leaves the purse once it is: an admission in
		// between counts it once or twice, never not at all.
		m.hold.settle(cost)
		defer m.hold.committed(cost)
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		defer cancel()
		if err := l.Commit(ctx, m.group, Metered{At: time.Now(), Model: m.model, Tokens: m.tok, CostUSD: cost}); err != nil {
			m.p.log.Error().Err(err).Str("group", m.group).Str("model", m.model).Float64("cost_usd", cost).Msg("cannot commit an API response's usage to the ledger")
		}
	})
}

// estimateOutput fills in, for a response that ended without its final
// usage, the output it carried (and a JSON body's prompt), at the
// estimate's rates. A response that carried nothing is left as it is.
func (m *meter) estimateOutput() {
	if m.final {
		return
	}
	var out int64
	if m.sse {
		out = ceilDiv(m.carried, estimateBytesPerToken)
	} else {
		out = ceilDiv(m.bytes, estimateBytesPerToken)
		if out > 0 && !m.seen {
			m.tok.Input = max(m.tok.Input, ceilDiv(m.hold.bodyBytes(), estimatePromptBytesPerToken))
		}
	}
	if out <= m.tok.Output {
		return
	}
	m.tok.Output = out
	if m.model == "" && m.hold != nil {
		m.model = m.hold.model
	}
	m.seen, m.estimated = true, true
}

func ceilDiv(n, d int64) int64 { return (max(n, 0) + d - 1) / d }

// unknownModel logs, once per model, that model is not in the pricing
// table and is priced as fam.
func (p *Proxy) unknownModel(model string, fam Family) {
	p.mu.Lock()
	seen := p.unknown[model]
	p.unknown[model] = true
	p.mu.Unlock()
	if !seen {
		p.log.Warn().Str("model", model).Str("priced_as", fam.Name).
			Msg("model not in the pricing table: priced as the most expensive known family")
	}
}

// add adds u to group's live tally.
func (p *Proxy) add(group string, u Usage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.usage[group]
	if t == nil {
		t = &Usage{}
		p.usage[group] = t
	}
	t.Requests += u.Requests
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.CacheCreationInputTokens += u.CacheCreationInputTokens
	t.CacheReadInputTokens += u.CacheReadInputTokens
	t.CostUSD += u.CostUSD
	t.Last = time.Now()
}
