package runner

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

// fixtureDir holds the CLI's recorded sessions (see its README).
var fixtureDir = filepath.Join("..", "..", "internal", "claudecli", "testdata", "fixtures")

// replay feeds a recorded timeline to l, in order, the way run does: each
// user message written to the CLI is a write, each line the CLI printed is
// what claude said. It stops right after the nth message of kind until
// ("write", "init" or "result"; "" plays it all), as if claude died there.
// It returns the events the ledger answered with.
func replay(t *testing.T, l *ledger, name, until string, nth int, noTurnCost bool) []ipc.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name+".timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var events []ipc.Event
	lastAssistant := "" // what claudecli.Process.LastAssistantUUID tracks
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seen := map[string]int{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var entry struct {
			T    float64 `json:"t"`
			Dir  string  `json:"dir"`
			Line string  `json:"line"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("%s line %d: %v", name, i+1, err)
		}
		kind := ""
		switch entry.Dir {
		case "in":
			var in struct {
				Type    string `json:"type"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal([]byte(entry.Line), &in) != nil || in.Type != "user" {
				continue
			}
			l.wrote(in.Message.Content)
			kind = "write"
		case "out":
			m, err := claudecli.Parse([]byte(entry.Line))
			if err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			if m.Assistant != nil && m.Assistant.ParentToolUseID == nil && m.Assistant.UUID != "" {
				lastAssistant = m.Assistant.UUID
			}
			switch {
			case m.System != nil && m.System.Subtype == claudecli.SystemInit:
				l.turnStarted()
				if ev, ok := l.report(m.System.SessionID); ok {
					events = append(events, ev)
				}
				kind = "init"
			case m.System != nil && m.System.Subtype == claudecli.SystemSessionStateChanged:
				l.stateChanged(m.System.State)
			case m.System != nil && m.System.Subtype == claudecli.SystemCompactBoundary:
				l.compacted()
			case m.Result != nil:
				kind = "result"
				if l.unknownSession(m.Result) {
					break
				}
				if noTurnCost {
					m.Result.ModelUsageSinceLastResult = nil
				}
				ev := l.result(m.Result, at.Add(time.Duration(entry.T*float64(time.Second))), lastAssistant)
				if s, ok := l.report(m.Result.SessionID); ok {
					events = append(events, s)
				}
				events = append(events, ev)
			}
		}
		if kind != "" && kind == until {
			if seen[kind]++; seen[kind] == nth {
				break
			}
		}
	}
	return events
}

// ended is what a test checks of a result event.
type ended struct {
	text     string
	isError  bool
	cost     float64
	lastUUID string
}

func TestLedgerReplaysRecordedTurns(t *testing.T) {
	tests := []struct {
		name       string
		fixture    string
		resumeAt   string // the run input's resume point
		until      string // claude dies right after the nth message of this kind
		nth        int
		noTurnCost bool // drop model_usage_since_last_result from results
		wantSes    []string
		wantTurns  []ended
		// After the last line played:
		wantUnanswered []string // sent again to a restarted claude
		wantUnknown    bool     // the CLI refused the session to resume
		wantDropped    []string // what the refusal dropped, sent again to a fresh session
		wantInFlight   bool
		wantResumeAt   string
	}{{
		name:           "a normal turn",
		fixture:        "01-single-turn",
		wantSes:        []string{"2c8e9ed0-c57e-4605-bc4c-d8315a8f81a4"},
		wantTurns:      []ended{{"pong: hello world", false, 0.000188, "f3982476-d221-41b6-b8ab-f41746b9660f"}},
		wantUnanswered: []string{},
		wantResumeAt:   "f3982476-d221-41b6-b8ab-f41746b9660f",
	}, {
		name:    "a turn with tool calls resumes at its last top-level message",
		fixture: "04-mcp-tool",
		wantSes: []string{"71fe440b-c0af-461e-a1a5-0f6ce9786474"},
		wantTurns: []ended{
			{"done", false, 0.000376, "c12d17a7-bf8a-4001-a23b-f1abae6892ad"},
		},
		wantUnanswered: []string{},
		wantResumeAt:   "c12d17a7-bf8a-4001-a23b-f1abae6892ad",
	}, {
		name:    "an error result is a finished turn",
		fixture: "08-api-error",
		wantSes: []string{"a3c25684-3fa8-4709-85c4-0ac96f56ca6b"},
		wantTurns: []ended{{
			"API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:<PORT>).",
			true, 0, "0ed385c4-7d4b-4ab5-9109-63f4811d1e89",
		}},
		wantUnanswered: []string{},
		wantResumeAt:   "0ed385c4-7d4b-4ab5-9109-63f4811d1e89",
	}, {
		name:    "a compaction leaves nothing to resume at",
		fixture: "05-hooks",
		wantSes: []string{"ba98c4bc-dd0e-4681-95d1-388c78014ef2"},
		wantTurns: []ended{
			{"bash said: rewritten-by-hook", false, 0.000376, "e41b5537-9b16-41e3-ab15-607507887ba5"},
			{"", false, 0.000376, ""},
		},
		wantUnanswered: []string{},
		wantResumeAt:   "",
	}, {
		name:    "two turns",
		fixture: "02-multi-turn",
		wantSes: []string{"1136e566-5921-4965-90a3-7838ed10d293"},
		wantTurns: []ended{
			{"pong: first message", false, 0.000141, "4f5b6dc0-01c7-4986-8bca-4ebac800429b"},
			{"pong: second message", false, 0.000141, "1f04c35f-3ca0-445e-82e7-5ddc8377cb78"},
		},
		wantUnanswered: []string{},
		wantResumeAt:   "1f04c35f-3ca0-445e-82e7-5ddc8377cb78",
	}, {
		name:       "without a per-turn figure the cost is the total's growth",
		fixture:    "02-multi-turn",
		noTurnCost: true,
		wantSes:    []string{"1136e566-5921-4965-90a3-7838ed10d293"},
		wantTurns: []ended{
			{"pong: first message", false, 0.000141, "4f5b6dc0-01c7-4986-8bca-4ebac800429b"},
			{"pong: second message", false, 0.000141, "1f04c35f-3ca0-445e-82e7-5ddc8377cb78"},
		},
		wantUnanswered: []string{},
		wantResumeAt:   "1f04c35f-3ca0-445e-82e7-5ddc8377cb78",
	}, {
		name:    "a crash mid-turn leaves that turn to send again",
		fixture: "02-multi-turn",
		until:   "init", nth: 2,
		wantSes: []string{"1136e566-5921-4965-90a3-7838ed10d293"},
		wantTurns: []ended{
			{"pong: first message", false, 0.000141, "4f5b6dc0-01c7-4986-8bca-4ebac800429b"},
		},
		wantUnanswered: []string{"second message"},
		wantInFlight:   true,
		wantResumeAt:   "4f5b6dc0-01c7-4986-8bca-4ebac800429b",
	}, {
		name:     "a crash in the first turn resumes where the run input said",
		fixture:  "01-single-turn",
		resumeAt: "earlier-uuid",
		until:    "init", nth: 1,
		wantSes:        []string{"2c8e9ed0-c57e-4605-bc4c-d8315a8f81a4"},
		wantUnanswered: []string{"hello world"},
		wantInFlight:   true,
		wantResumeAt:   "earlier-uuid",
	}, {
		name:    "a crash before the first turn began keeps the prompt",
		fixture: "01-single-turn",
		until:   "write", nth: 1,
		wantUnanswered: []string{"hello world"},
		wantInFlight:   true,
	}, {
		name:    "a message written mid-turn stays until a later turn's result",
		fixture: "17-raw-midturn-followup",
		until:   "result", nth: 1,
		wantSes: []string{"ee4f0bc9-87f5-43b7-b745-54f225fe90fa"},
		wantTurns: []ended{
			{"pong: SLOW first", false, 0.000188, "36950d0f-3c79-4a21-9e59-2edd9ad66da6"},
		},
		wantUnanswered: []string{"second message"},
		// Between the result and the queued turn's init claude looks idle:
		// run's close grace covers that gap.
		wantInFlight: false,
		wantResumeAt: "36950d0f-3c79-4a21-9e59-2edd9ad66da6",
	}, {
		name:        "an unknown session to resume answers nothing",
		fixture:     "18-raw-unknown-resume",
		wantUnknown: true,
		wantDropped: []string{"hello to a session that does not exist"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(tc.resumeAt)
			l.started()
			events := replay(t, l, tc.fixture, tc.until, tc.nth, tc.noTurnCost)
			var sessions []string
			var turns []ended
			for _, ev := range events {
				switch ev.Type {
				case ipc.EventSession:
					if ev.Fresh {
						t.Errorf("session %s reported fresh", ev.SessionID)
					}
					sessions = append(sessions, ev.SessionID)
				case ipc.EventResult:
					turns = append(turns, ended{ev.Text, ev.IsError, ev.CostUSD, ev.LastUUID})
				}
			}
			if !reflect.DeepEqual(sessions, tc.wantSes) {
				t.Errorf("sessions reported %q; want %q", sessions, tc.wantSes)
			}
			if len(turns) != len(tc.wantTurns) {
				t.Fatalf("results %+v; want %+v", turns, tc.wantTurns)
			}
			for i, got := range turns {
				want := tc.wantTurns[i]
				if math.Abs(got.cost-want.cost) > 1e-12 {
					t.Errorf("result %d cost %v; want %v", i, got.cost, want.cost)
				}
				got.cost = want.cost
				if got != want {
					t.Errorf("result %d %+v; want %+v", i, got, want)
				}
			}
			if tc.wantUnknown {
				if !l.unknownSes || !reflect.DeepEqual(l.unconfirmed, tc.wantDropped) {
					t.Errorf("unknown session %v, dropped %q; want true, %q", l.unknownSes, l.unconfirmed, tc.wantDropped)
				}
				return
			}
			if l.unknownSes {
				t.Error("session taken for unknown")
			}
			if got := l.unanswered(); !reflect.DeepEqual(got, tc.wantUnanswered) {
				t.Errorf("unanswered %q; want %q", got, tc.wantUnanswered)
			}
			if got := l.inFlight(); got != tc.wantInFlight {
				t.Errorf("in flight %v; want %v", got, tc.wantInFlight)
			}
			if l.lastUUID != tc.wantResumeAt {
				t.Errorf("resume at %q; want %q", l.lastUUID, tc.wantResumeAt)
			}
		})
	}
}

// TestLedgerRestart follows the ledger through a crash mid-turn, the restart
// that sends the turn again, and the result that settles it.
func TestLedgerRestart(t *testing.T) {
	l := newLedger("")
	l.started()
	replay(t, l, "02-multi-turn", "init", 2, false)
	resend := l.unanswered()
	if !reflect.DeepEqual(resend, []string{"second message"}) {
		t.Fatalf("to send again %q; want the turn in flight", resend)
	}
	resumeAt := l.lastUUID

	// The restarted claude takes the first message, then dies before the
	// second: both stay for the next one.
	l.started()
	if l.inFlight() || len(l.unanswered()) != 0 {
		t.Fatalf("a new process starts with nothing in flight: %v %q", l.inFlight(), l.unanswered())
	}
	l.wrote(resend[0])
	l.undelivered([]string{"third"})
	if got := l.unanswered(); !reflect.DeepEqual(got, []string{"second message", "third"}) {
		t.Fatalf("unanswered %q", got)
	}
	if !l.inFlight() {
		t.Error("a written message is not in flight")
	}

	// Its turn runs and ends: everything written before it began is settled,
	// the cost starts again from the new process's total, and the session
	// already reported is not reported again.
	if !reflect.DeepEqual(l.unconfirmed, []string{"second message", "third"}) {
		t.Errorf("before its first turn the process confirmed none of %q", l.unconfirmed)
	}
	l.turnStarted()
	if len(l.unconfirmed) != 0 {
		t.Errorf("unconfirmed %q after a turn began", l.unconfirmed)
	}
	// Once a turn ran, the session was known: a later error result naming an
	// unknown session is an ordinary failed turn.
	if l.unknownSession(&claudecli.Result{IsError: true, Errors: []string{"No conversation found with session ID: x"}}) {
		t.Error("an unknown-session result after a turn began taken for a refused resume")
	}
	if _, ok := l.report("1136e566-5921-4965-90a3-7838ed10d293"); ok {
		t.Error("the same session reported twice")
	}
	ev := l.result(&claudecli.Result{Result: "pong", TotalCostUSD: 0.5}, time.Now(), "new-uuid")
	if ev.CostUSD != 0.5 || ev.LastUUID != "new-uuid" || ev.Text != "pong" {
		t.Errorf("result event %+v", ev)
	}
	if got := l.unanswered(); len(got) != 0 || l.inFlight() {
		t.Errorf("after the result: unanswered %q, in flight %v", got, l.inFlight())
	}
	if resumeAt == "" || resumeAt == l.lastUUID {
		t.Errorf("resume point %q did not move to the new turn's %q", resumeAt, l.lastUUID)
	}

	// A session replaced by a fresh one has nothing to resume at and is
	// reported as fresh, once.
	l.freshSession()
	if l.lastUUID != "" {
		t.Errorf("resume at %q after a fresh session", l.lastUUID)
	}
	if ev, ok := l.report("new-session"); !ok || !ev.Fresh || ev.SessionID != "new-session" {
		t.Errorf("fresh session report %+v, %v", ev, ok)
	}
	if ev, ok := l.report("newer-session"); !ok || ev.Fresh {
		t.Errorf("next session report %+v, %v; want not fresh", ev, ok)
	}
}
