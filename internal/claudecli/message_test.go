package claudecli

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// parseFixture parses every non-blank line of a recorded stdout file and
// fails on any line it cannot classify.
func parseFixture(t *testing.T, name string) []Message {
	t.Helper()
	var out []Message
	for i, line := range fixtureLines(t, name) {
		m, err := Parse([]byte(line))
		if err != nil {
			t.Errorf("%s line %d: %v", name, i+1, err)
			continue
		}
		if !m.Known() {
			sub := ""
			if m.System != nil {
				sub = "/" + string(m.System.Subtype)
			}
			t.Errorf("%s line %d: unclassified message %s%s", name, i+1, m.Type, sub)
		}
		out = append(out, m)
	}
	return out
}

func results(msgs []Message) []*Result {
	var out []*Result
	for _, m := range msgs {
		if m.Result != nil {
			out = append(out, m.Result)
		}
	}
	return out
}

func TestEveryRecordedLineIsClassified(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*.stdout.jsonl"))
	if err != nil || len(files) < 30 {
		t.Fatalf("found %d stdout fixtures (%v); want the whole recording set", len(files), err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".stdout.jsonl"), func(t *testing.T) {
			parseFixture(t, name)
		})
	}
}

func TestRecordedResults(t *testing.T) {
	type want struct {
		text       string
		isError    bool
		subtype    string
		terminal   string
		unknownSes bool
	}
	tests := []struct {
		fixture string
		session string
		results []want
	}{
		{
			fixture: "02-multi-turn",
			session: "1136e566-5921-4965-90a3-7838ed10d293",
			results: []want{
				{text: "pong: first message", subtype: "success", terminal: "completed"},
				{text: "pong: second message", subtype: "success", terminal: "completed"},
			},
		},
		{
			// An API failure is subtype success with is_error true.
			fixture: "08-api-error",
			session: "a3c25684-3fa8-4709-85c4-0ac96f56ca6b",
			results: []want{{
				text:    "API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:<PORT>).",
				isError: true, subtype: "success", terminal: "api_error",
			}},
		},
		{
			fixture: "09-interrupt",
			session: "1b05608d-1845-42ca-966b-525c9abc2418",
			results: []want{
				{isError: true, subtype: "error_during_execution", terminal: "aborted_streaming"},
				{text: "pong: after interrupt", subtype: "success", terminal: "completed"},
			},
		},
		{
			fixture: "18-raw-unknown-resume",
			session: "d30afbd0-53ca-4ad4-a777-959e8fd3fa64",
			results: []want{{
				text:    "No conversation found with session ID: d30afbd0-53ca-4ad4-a777-959e8fd3fa64",
				isError: true, subtype: "error_during_execution", unknownSes: true,
			}},
		},
		{
			fixture: "17c-raw-midturn-during-tool",
			session: "2be0d04d-034d-48bd-a9c0-688de907168e",
			results: []want{{text: "bash said: hi", subtype: "success", terminal: "completed"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			msgs := parseFixture(t, tc.fixture+".stdout.jsonl")
			var got []want
			for _, r := range results(msgs) {
				if r.SessionID != tc.session {
					t.Errorf("result session %q; want %q", r.SessionID, tc.session)
				}
				got = append(got, want{
					text: r.Text(), isError: r.IsError, subtype: r.Subtype,
					terminal: r.TerminalReason, unknownSes: r.UnknownSession(),
				})
			}
			if !reflect.DeepEqual(got, tc.results) {
				t.Errorf("results\n got %+v\nwant %+v", got, tc.results)
			}
		})
	}
}

func TestAPIErrorTextComesFromAssistant(t *testing.T) {
	msgs := parseFixture(t, "08-api-error.stdout.jsonl")
	var retries int
	var synthetic *Assistant
	for _, m := range msgs {
		if m.System != nil && m.System.Subtype == SystemAPIRetry {
			retries++
			if m.System.ErrorStatus != 500 || m.System.Error != "overloaded" {
				t.Errorf("api_retry %+v", m.System)
			}
		}
		if m.Assistant != nil {
			synthetic = m.Assistant
		}
	}
	if retries != 2 {
		t.Errorf("api_retry lines %d; want 2", retries)
	}
	if synthetic == nil || synthetic.Error != "server_error" || !strings.HasPrefix(synthetic.Text(), "API Error:") {
		t.Errorf("synthetic assistant %+v; want server_error with the API error text", synthetic)
	}
}

func TestTurnCostAndUsage(t *testing.T) {
	rs := results(parseFixture(t, "02-multi-turn.stdout.jsonl"))
	if len(rs) != 2 {
		t.Fatalf("%d results; want 2", len(rs))
	}
	// total_cost_usd adds up across turns; the per-turn figure does not.
	if rs[1].TotalCostUSD != 0.000282 {
		t.Errorf("second total_cost_usd %v; want 0.000282", rs[1].TotalCostUSD)
	}
	for i, r := range rs {
		cost, ok := r.TurnCostUSD()
		if !ok || cost != 0.000141 {
			t.Errorf("result %d turn cost %v, %v; want 0.000141", i, cost, ok)
		}
		if r.Usage.InputTokens != 12 || r.Usage.OutputTokens != 7 || r.NumTurns != 1 {
			t.Errorf("result %d usage %+v turns %d", i, r.Usage, r.NumTurns)
		}
	}
}

func TestCompactionSequence(t *testing.T) {
	msgs := parseFixture(t, "05-hooks.stdout.jsonl")
	var hooks []string
	var boundary *CompactMetadata
	var local string
	for _, m := range msgs {
		if m.ControlRequest != nil && m.ControlRequest.Subtype == ControlHook {
			hooks = append(hooks, m.ControlRequest.RequestID)
		}
		if m.System != nil && m.System.Subtype == SystemCompactBoundary {
			boundary = m.System.CompactMetadata
		}
		if m.Result != nil && m.Result.LocalCommand != "" {
			local = m.Result.LocalCommand
		}
	}
	if len(hooks) != 2 {
		t.Errorf("hook callbacks %v; want 2", hooks)
	}
	if boundary == nil || boundary.Trigger != "manual" {
		t.Errorf("compact boundary %+v; want trigger manual", boundary)
	}
	if local != "compact" {
		t.Errorf("local command %q; want compact", local)
	}
}

func TestParseTolerance(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantType  MessageType
		wantKnown bool
		wantErr   error
	}{
		{name: "unknown type", line: `{"type":"rate_limit_event","rate_limit_info":{}}`, wantType: "rate_limit_event"},
		{name: "unknown system subtype", line: `{"type":"system","subtype":"task_progress","session_id":"s"}`, wantType: TypeSystem},
		{name: "type not first", line: `{"is_error":false,"type":"result","result":"x"}`, wantType: TypeResult, wantKnown: true},
		{name: "keep alive", line: `{"type":"keep_alive"}`, wantType: TypeKeepAlive, wantKnown: true},
		{name: "not json", line: `[SandboxDebug] hello`, wantErr: ErrNotJSON},
		{name: "broken json", line: `{"type":"result",`, wantErr: ErrNotJSON},
		{name: "blank", line: ``, wantErr: ErrNotJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.line))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v; want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if m.Type != tc.wantType || m.Known() != tc.wantKnown {
				t.Errorf("type %q known %v; want %q known %v", m.Type, m.Known(), tc.wantType, tc.wantKnown)
			}
		})
	}
	// A known type with a field of the wrong shape is an error, not a panic.
	m, err := Parse([]byte(`{"type":"result","is_error":"yes"}`))
	if err == nil || m.Type != TypeResult || m.Result != nil {
		t.Errorf("bad result: %+v, %v; want an error naming the type", m, err)
	}
}

func TestUserMessageText(t *testing.T) {
	tests := []struct{ content, want string }{
		{`"plain"`, "plain"},
		{`[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]`, "a\nb"},
		{`[{"type":"tool_result","tool_use_id":"t","content":"x"}]`, ""},
		{``, ""},
	}
	for _, tc := range tests {
		if got := (UserMessage{Content: []byte(tc.content)}).Text(); got != tc.want {
			t.Errorf("Text(%s) = %q; want %q", tc.content, got, tc.want)
		}
	}
}
