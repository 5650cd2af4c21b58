package credproxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Reserving money before a request (docs/decisions.md). A Messages API
// request of a group is let through while the ledger's spending today plus
// the worst cases of the group's requests in flight is under its daily
// budget; it then reserves its own worst case (Family.Worst):
//
//   - its prompt at one token per byte of the request body (no token is
//     shorter than a byte), every one priced as a 1-hour cache write; a
//     body of no declared length that runs past peekLimit counts as the
//     proxy's body cap;
//   - its answer at its max_tokens (DefaultReserveOutput when the body
//     does not say, within the first peekLimit bytes, or says it
//     unreadably);
//   - at its model's price; a model missing from the pricing table, or not
//     found, at the priciest family's.
//
// The reservation is settled when the request ends, however it ends: with
// the charge its response was metered at (ledger.go), or with nothing (an
// upstream error, a refused or lost connection). So a group whose budget is
// crossed overshoots it by at most the reserve of the one request that
// crossed it. Reservations live in memory under the proxy's lock: a daemon
// restart cuts the requests in flight and keeps only the ledger.

// peekLimit is how much of a request body is read before the request is
// admitted, to find its model and max_tokens; the rest streams on.
const peekLimit = 1 << 20

// DefaultReserveOutput is the answer reserved for a request whose
// max_tokens is not known: the largest max_tokens the Claude CLI sends.
const DefaultReserveOutput = 128_000

// BudgetRetryAfter is the Retry-After, in seconds, of a request refused
// because the group's requests in flight hold what is left of its budget.
const BudgetRetryAfter = "5"

// purse is one group's reservations. Its lock is held across the ledger's
// admission read, so two requests of a group are never admitted against
// the same money.
type purse struct {
	mu       sync.Mutex
	reserved float64 // the worst cases of the requests in flight
	inFlight int
	pending  float64 // charges settled but not yet in the ledger
	commits  int
}

// held is what counts against the budget beside the ledger. Called with
// pu.mu held.
func (pu *purse) held() float64 { return pu.reserved + pu.pending }

// purse returns group's purse.
func (p *Proxy) purse(group string) *purse {
	p.mu.Lock()
	defer p.mu.Unlock()
	pu := p.purses[group]
	if pu == nil {
		pu = &purse{}
		p.purses[group] = pu
	}
	return pu
}

// hold is one admitted request's reservation.
type hold struct {
	pu      *purse
	usd     float64
	model   string // as the request named it ("" if not found)
	body    *peekedBody
	settled bool // under pu.mu
}

// settle ends h's reservation, with cost on its way to the ledger (0:
// nothing charged); it reports false when h was settled already. A nil
// hold settles nothing.
func (h *hold) settle(cost float64) bool {
	if h == nil {
		return false
	}
	pu := h.pu
	pu.mu.Lock()
	defer pu.mu.Unlock()
	if h.settled {
		return false
	}
	h.settled = true
	if pu.inFlight--; pu.inFlight <= 0 {
		pu.inFlight, pu.reserved = 0, 0
	} else {
		pu.reserved -= h.usd
	}
	if cost > 0 {
		pu.pending += cost
		pu.commits++
	}
	return true
}

// committed says that cost, settled by settle, is now in the ledger (or
// could not be put there).
func (h *hold) committed(cost float64) {
	if h == nil || cost <= 0 {
		return
	}
	pu := h.pu
	pu.mu.Lock()
	defer pu.mu.Unlock()
	if pu.commits--; pu.commits <= 0 {
		pu.commits, pu.pending = 0, 0
	} else {
		pu.pending -= cost
	}
}

// bodyBytes is how many bytes of the request body went upstream.
func (h *hold) bodyBytes() int64 {
	if h == nil || h.body == nil {
		return 0
	}
	return h.body.n.Load()
}

// estimate is what a request is reckoned to be before it is sent.
type estimate struct {
	model     string
	bodyBytes int64 // the body's size; MaxBody when not known
	maxTokens int64
	usd       float64 // the worst case
}

// peek reads up to peekLimit bytes of r's body, finds its model and
// max_tokens, and puts the bytes back in front of the rest.
func (p *Proxy) peek(r *http.Request) (estimate, *peekedBody) {
	est := estimate{maxTokens: DefaultReserveOutput, bodyBytes: p.lim.lim.MaxBody}
	var pb *peekedBody
	if r.Body != nil && r.Body != http.NoBody {
		var (
			buf []byte
			err error
		)
		if r.ContentLength >= 0 {
			buf = make([]byte, min(r.ContentLength, peekLimit))
			var got int
			got, err = io.ReadFull(r.Body, buf)
			buf = buf[:got]
			est.bodyBytes = r.ContentLength
		} else {
			// No declared length: read one byte past the limit to know
			// whether the body ended within it.
			var b bytes.Buffer
			_, err = b.ReadFrom(io.LimitReader(r.Body, peekLimit+1))
			buf = b.Bytes()
			if err == nil && len(buf) <= peekLimit {
				est.bodyBytes = int64(len(buf))
			}
		}
		pb = &peekedBody{pre: buf, rest: r.Body}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			pb.err = err // the body failed: so does the request, as it would have
		}
		r.Body = pb
		if m, mt, ok := requestFields(buf); ok {
			est.model = m
			if mt >= 0 {
				est.maxTokens = mt
			}
		}
	} else {
		est.bodyBytes = 0
	}
	fam, _ := FamilyOf(est.model)
	est.usd = fam.Worst(est.bodyBytes, est.maxTokens)
	return est, pb
}

// peekedBody is a request body whose start was read before it was
// admitted: that start, then the rest. It counts what it gave.
type peekedBody struct {
	pre  []byte
	err  error // after pre, instead of the rest
	rest io.ReadCloser
	n    atomic.Int64 // read by the meter; the transport reads the body on its own goroutine
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		k := copy(p, b.pre)
		b.pre = b.pre[k:]
		if len(b.pre) == 0 {
			b.pre = nil
		}
		b.n.Add(int64(k))
		return k, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	k, err := b.rest.Read(p)
	b.n.Add(int64(k))
	return k, err
}

func (b *peekedBody) Close() error { return b.rest.Close() }

var (
	keyModel     = []byte("model")
	keyMaxTokens = []byte("max_tokens")
)

// requestFields finds the top-level "model" (a plain string) and
// "max_tokens" (an integer) of a Messages API request body in one pass,
// without decoding anything else. ok is false when b is not a JSON object.
// maxTokens is -1 when not found or not a plain integer; a key written
// twice keeps the larger max_tokens and drops the model (priced as the
// priciest). A key spelled with escapes is not found, which reserves more,
// never less.
func requestFields(b []byte) (model string, maxTokens int64, ok bool) {
	maxTokens = -1
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", -1, false
	}
	modelSeen := false
	depth, expectKey := 0, false
	for i < len(b) {
		switch c := b[i]; c {
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
			i++
		case '}', ']':
			depth--
			i++
		case ',':
			expectKey = depth == 1
			i++
		case '"':
			end := stringEnd(b, i)
			if end < 0 {
				return model, maxTokens, true
			}
			if depth != 1 || !expectKey {
				i = end
				continue
			}
			key := b[i+1 : end-1]
			expectKey = false
			j := skipSpace(b, end)
			if j >= len(b) || b[j] != ':' {
				return model, maxTokens, true
			}
			j = skipSpace(b, j+1)
			switch {
			case bytes.Equal(key, keyModel):
				if j < len(b) && b[j] == '"' {
					e := stringEnd(b, j)
					if e < 0 {
						return model, maxTokens, true
					}
					v := b[j+1 : e-1]
					if modelSeen || bytes.IndexByte(v, '\\') >= 0 {
						model = ""
					} else {
						model = string(v)
					}
					modelSeen = true
					j = e
				}
			case bytes.Equal(key, keyMaxTokens):
				k, v := j, int64(0)
				for k < len(b) && b[k] >= '0' && b[k] <= '9' && k-j < 12 {
					v = v*10 + int64(b[k]-'0')
					k++
				}
				if k > j && (k == len(b) || b[k] == ',' || b[k] == '}' || b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t') {
					maxTokens = max(maxTokens, v)
				} else if k > j {
					maxTokens = max(maxTokens, DefaultReserveOutput) // 1e3, 1.5, or longer than any real one
				}
				j = k
			}
			i = j
		default:
			i++
		}
	}
	return model, maxTokens, true
}

// stringEnd returns the index just past the JSON string starting at b[i]
// (a '"'), or -1 when b ends inside it.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		bs := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}
