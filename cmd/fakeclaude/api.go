package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiResult is what fake:api got.
type apiResult struct {
	text   string
	status int // non-zero: an HTTP error status
	err    string
}

// apiDirective makes one Messages API request the way the real CLI does:
// POST $ANTHROPIC_BASE_URL/v1/messages?beta=true with x-api-key from
// ANTHROPIC_API_KEY, or Authorization: Bearer (and the OAuth beta) from
// CLAUDE_CODE_OAUTH_TOKEN. arg is "stream" (optionally followed by the
// prompt) or the prompt. The reply is the response's text (the text deltas,
// concatenated, when streaming); each streamed event is also logged on
// stderr as it arrives ("fakeclaude: api event <n> <type>").
func (f *fake) apiDirective(ctx context.Context, arg string) apiResult {
	stream := false
	if rest, ok := strings.CutPrefix(arg, "stream"); ok && (rest == "" || rest[0] == ' ') {
		stream, arg = true, strings.TrimSpace(rest)
	}
	if arg == "" {
		arg = "ping"
	}
	base := getenv(f.env, "ANTHROPIC_BASE_URL")
	if base == "" {
		base = "https://api.anthropic.com"
	}
	f.mu.Lock()
	model := f.model
	f.mu.Unlock()
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	body, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": 1024, "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": arg}}}},
	})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/messages?beta=true", strings.NewReader(string(body)))
	if err != nil {
		return apiResult{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-App", "cli")
	req.Header.Set("User-Agent", "claude-cli/fake (external, sdk-ts)")
	switch {
	case getenv(f.env, "ANTHROPIC_API_KEY") != "":
		req.Header.Set("X-Api-Key", getenv(f.env, "ANTHROPIC_API_KEY"))
	case getenv(f.env, "CLAUDE_CODE_OAUTH_TOKEN") != "":
		req.Header.Set("Authorization", "Bearer "+getenv(f.env, "CLAUDE_CODE_OAUTH_TOKEN"))
		req.Header.Set("Anthropic-Beta", "oauth-2025-04-20")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiResult{err: err.Error()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return apiResult{status: resp.StatusCode, text: strings.TrimSpace(string(msg))}
	}
	if !stream {
		var m struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return apiResult{err: "decode response: " + err.Error()}
		}
		var b strings.Builder
		for _, c := range m.Content {
			if c.Type == "text" {
				b.WriteString(c.Text)
			}
		}
		return apiResult{text: b.String()}
	}
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &ev) != nil {
			continue
		}
		n++
		fmt.Fprintf(f.stderr, "fakeclaude: api event %d %s\n", n, ev.Type)
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			b.WriteString(ev.Delta.Text)
		}
		if ev.Type == "message_stop" {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return apiResult{err: "read stream: " + err.Error()}
	}
	return apiResult{text: b.String()}
}

// apiErrorType is the error type the API gives with an HTTP status, as the
// CLI reports it in api_error_type.
func apiErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 0, http.StatusInternalServerError:
		return "overloaded_error"
	}
	return "api_error"
}
