package ipchost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// approver holds each ask until the test releases it; it takes the
// announcements in announced.
type approver struct {
	asked   chan ipc.AskApprovalArgs
	release chan ipc.ApprovalDecision

	mu        sync.Mutex
	announced map[string]bool // tool_use_id+" "+tool
}

func (a *approver) Ask(ctx context.Context, folder, requestID string, args ipc.AskApprovalArgs) (ipc.ApprovalDecision, error) {
	a.asked <- args
	select {
	case d := <-a.release:
		return d, nil
	case <-ctx.Done():
		return ipc.ApprovalDecision{}, ctx.Err()
	}
}

func (a *approver) Claim(_ context.Context, _, toolUseID, tool string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := toolUseID + " " + tool
	if !a.announced[k] {
		return false
	}
	delete(a.announced, k)
	return true
}

func (a *approver) announce(toolUseID, tool string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.announced == nil {
		a.announced = map[string]bool{}
	}
	a.announced[toolUseID+" "+tool] = true
}

func setTools(t *testing.T, db *store.DB, folder store.Folder, p store.ToolProfile) {
	t.Helper()
	ctx := context.Background()
	g, err := db.Groups.ByFolder(ctx, folder)
	if err != nil {
		t.Fatal(err)
	}
	g.Tools = p
	if err := db.Groups.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
}

// An ask_approval waits on a side lane: the group's other requests are
// answered meanwhile, and the approval is answered once decided.
func TestAskApprovalDoesNotBlockTheGroup(t *testing.T) {
	e := newEnv(t)
	setTools(t, e.db, "family", store.ToolsAsk)
	ap := &approver{asked: make(chan ipc.AskApprovalArgs, 1), release: make(chan ipc.ApprovalDecision, 1)}
	ap.announce("toolu_1", "Bash")
	e.h.cfg.Approver = ap
	handled := e.run(t)
	dir := e.requestsDir("family")

	ask := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", Input: json.RawMessage(`{"command":"rm x"}`), ToolUseID: "toolu_1"})
	writeRequest(t, dir, ask)
	if got := <-ap.asked; got.Tool != "Bash" {
		t.Fatalf("asked %+v", got)
	}
	send := ipc.NewRequest(ipc.SendMessageArgs{Text: "meanwhile"})
	writeRequest(t, dir, send)
	waitHandled(t, handled, "family", send.FileName())
	if resp, ok := e.response(t, "family", send.ID); !ok || !resp.OK {
		t.Fatalf("send_message not answered while the approval waits: %+v", resp)
	}
	if _, ok := e.response(t, "family", ask.ID); ok {
		t.Fatal("the approval was answered before it was decided")
	}
	ap.release <- ipc.ApprovalDecision{Allow: true, ID: "abcd"}
	waitHandled(t, handled, "family", ask.FileName())
	resp, ok := e.response(t, "family", ask.ID)
	if !ok || !resp.OK {
		t.Fatalf("approval response %+v, %v", resp, ok)
	}
	if d := decodeData[ipc.ApprovalDecision](t, resp); !d.Allow || d.ID != "abcd" {
		t.Errorf("decision %+v; want allowed abcd", d)
	}
}

// An ask_approval not from the pipeline is refused at once with an error
// response, and the owner is not asked: from a group whose profile never
// asks, for a tool call its runner did not announce (or announced once and
// already asked about), with a tool name that is not an identifier.
func TestAskApprovalOnlyFromThePipeline(t *testing.T) {
	e := newEnv(t)
	setTools(t, e.db, "family", store.ToolsAsk)
	ap := &approver{asked: make(chan ipc.AskApprovalArgs, 10), release: make(chan ipc.ApprovalDecision, 10)}
	ap.announce("toolu_1", "Bash")
	ap.announce("toolu_2", "Bash")
	e.h.cfg.Approver = ap
	handled := e.run(t)
	input := json.RawMessage(`{"command":"rm x"}`)

	for _, tc := range []struct {
		name, folder, tool, useID, want string
	}{
		{"full group", "work", "Bash", "toolu_2", "profile is full, which never asks"},
		{"not announced", "family", "Bash", "toolu_9", "not waiting on this tool call"},
		{"another tool than announced", "family", "Write", "toolu_1", "not waiting on this tool call"},
	} {
		req := ipc.NewRequest(ipc.AskApprovalArgs{Tool: tc.tool, Input: input, ToolUseID: tc.useID})
		writeRequest(t, e.requestsDir(store.Folder(tc.folder)), req)
		waitHandled(t, handled, store.Folder(tc.folder), req.FileName())
		resp, ok := e.response(t, store.Folder(tc.folder), req.ID)
		if !ok || resp.OK || !strings.Contains(resp.Error, "approval refused") || !strings.Contains(resp.Error, tc.want) {
			t.Errorf("%s: response %+v, %v; want refused: %s", tc.name, resp, ok, tc.want)
		}
	}
	// A tool name with ESC and a newline is malformed: refused, unasked.
	bad := []byte(`{"id":"req-bad","type":"ask_approval","args":{"tool":"Bash\u001b]52;c;eA==\u0007\n","input":{},"tool_use_id":"toolu_2"}}`)
	writeRaw(t, e.requestsDir("family"), "req-bad.json", string(bad))
	waitHandled(t, handled, "family", "req-bad.json")
	if resp, ok := e.response(t, "family", "req-bad"); !ok || resp.OK || !strings.Contains(resp.Error, "not an identifier") || strings.ContainsRune(resp.Error, 0x1b) {
		t.Errorf("tool name with ESC: response %+v, %v; want refused, without the ESC", resp, ok)
	}

	// The announced call is asked once; the same call again is refused.
	ask := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", Input: input, ToolUseID: "toolu_1"})
	writeRequest(t, e.requestsDir("family"), ask)
	<-ap.asked
	ap.release <- ipc.ApprovalDecision{ID: "abcd"}
	waitHandled(t, handled, "family", ask.FileName())
	again := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", Input: input, ToolUseID: "toolu_1"})
	writeRequest(t, e.requestsDir("family"), again)
	waitHandled(t, handled, "family", again.FileName())
	if resp, ok := e.response(t, "family", again.ID); !ok || resp.OK {
		t.Errorf("a second request for one announced call: %+v, %v; want refused", resp, ok)
	}
	select {
	case a := <-ap.asked:
		t.Errorf("the owner was asked about %+v", a)
	default:
	}
}

// Refusals are logged at most once per interval per group, with how many
// were refused since the last line.
func TestRefusalsAreLoggedSparingly(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf)
	var r refusalLog
	start := time.Unix(1_800_000_000, 0)
	for i := range 200 {
		r.log(log, "fam", "Bash\x1b[2J", errors.New("refused"), start.Add(time.Duration(i)*10*time.Millisecond))
	}
	r.log(log, "work", "Bash", errors.New("refused"), start)
	r.log(log, "fam", "Bash", errors.New("refused"), start.Add(refusalLogEvery+time.Second))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines for 202 refusals:\n%s\nwant 3", len(lines), buf.String())
	}
	if !strings.Contains(lines[2], `"refused":200`) || strings.ContainsRune(buf.String(), 0x1b) {
		t.Errorf("lines:\n%s\nwant the count of the refusals since the first line, and no ESC", buf.String())
	}
}
