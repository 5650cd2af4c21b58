package ipchost

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
)

// approver holds each ask until the test releases it.
type approver struct {
	asked   chan ipc.AskApprovalArgs
	release chan ipc.ApprovalDecision
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

// An ask_approval waits on a side lane: the group's other requests are
// answered meanwhile, and the approval is answered once decided.
func TestAskApprovalDoesNotBlockTheGroup(t *testing.T) {
	e := newEnv(t)
	ap := &approver{asked: make(chan ipc.AskApprovalArgs, 1), release: make(chan ipc.ApprovalDecision, 1)}
	e.h.cfg.Approver = ap
	handled := e.run(t)
	dir := e.requestsDir("family")

	ask := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", Input: json.RawMessage(`{"command":"rm x"}`)})
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
