package credproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// The proxy is the meter: every response that passes through it is read for
// its usage (the JSON body's, or the SSE stream's message_start and
// message_delta), priced from pricing, and committed to the Ledger as the
// response ends, one row per request. Before a Messages API request is
// forwarded, the Ledger is asked whether the group may spend; a group at
// its daily budget is answered 429 in the API's own shape, so the turn in
// flight ends at that request.

// Metered is one response's usage, priced.
type Metered struct {
	At      time.Time
	Model   string // as the upstream named it
	Tokens  Tokens
	CostUSD float64
}

// Ledger is where the metered usage goes and what decides whether a group
// may spend more. Its methods are called on the request's goroutine.
type Ledger interface {
	// Admit is asked before a Messages API request of group is forwarded:
	// "" lets it through; anything else is the refusal's message (the
	// group is at its daily budget).
	Admit(ctx context.Context, group string) string
	// Commit records one response's metered usage; it returns once the
	// record is durable.
	Commit(ctx context.Context, group string, m Metered) error
}

// commitTimeout bounds one ledger commit; the response has been served by
// then, so a caller that went away does not cancel it.
const commitTimeout = 30 * time.Second

// admit asks the ledger whether group may send a Messages API request; it
// answers the refusal itself and reports false.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, group string) bool {
	l := p.ledger
	if l == nil || r.URL.Path != "/v1/messages" {
		return true // count_tokens is free
	}
	msg := l.Admit(r.Context(), group)
	p.mu.Lock()
	was := p.refusing[group]
	if msg == "" {
		delete(p.refusing, group)
	} else {
		p.refusing[group] = true
	}
	p.mu.Unlock()
	if msg == "" {
		return true
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
	return false
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
}

const maxMeteredJSON = 4 << 20

func (m *meter) Read(b []byte) (int, error) {
	n, err := m.rc.Read(b)
	if n > 0 {
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
)

// event handles one SSE line: message_start carries the model and the
// input usage, message_delta the output (and, cumulative, any updated
// input) usage. Only data lines with a usage are decoded.
func (m *meter) event(line []byte) {
	line = bytes.TrimRight(line, "\r")
	data, ok := bytes.CutPrefix(line, sseData)
	if !ok || !bytes.Contains(data, sseUsageHint) {
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
			m.seen = true
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
				m.seen = true
			}
			m.whole = nil
		}
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
		l := m.p.ledger
		if l == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		defer cancel()
		if err := l.Commit(ctx, m.group, Metered{At: time.Now(), Model: m.model, Tokens: m.tok, CostUSD: cost}); err != nil {
			m.p.log.Error().Err(err).Str("group", m.group).Str("model", m.model).Float64("cost_usd", cost).Msg("cannot commit an API response's usage to the ledger")
		}
	})
}

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
