package ipchost

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// holdingMessenger is a Messenger that holds turns open for approvals and
// records the holds of each group.
type holdingMessenger struct {
	*fakeMessenger
	mu   sync.Mutex
	held map[string]int
}

func (m *holdingMessenger) HoldApproval(folder string) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[folder]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.held[folder]--
		})
	}
}

func (m *holdingMessenger) holds(folder string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[folder]
}

// The turn that asked is held open while its approval waits for the owner,
// and let go once the answer is written.
func TestAskApprovalHoldsTheTurn(t *testing.T) {
	e := newEnv(t)
	m := &holdingMessenger{fakeMessenger: e.msg, held: map[string]int{}}
	e.h.msg = m
	setTools(t, e.db, "family", store.ToolsAsk)
	ap := &approver{asked: make(chan ipc.AskApprovalArgs, 1), release: make(chan ipc.ApprovalDecision, 1)}
	ap.announce("toolu_1", "Bash")
	e.h.cfg.Approver = ap
	handled := e.run(t)

	ask := ipc.NewRequest(ipc.AskApprovalArgs{Tool: "Bash", Input: json.RawMessage(`{"command":"rm x"}`), ToolUseID: "toolu_1"})
	writeRequest(t, e.requestsDir("family"), ask)
	<-ap.asked
	if n := m.holds("family"); n != 1 {
		t.Fatalf("%d holds on family's turn while its approval waits; want 1", n)
	}
	ap.release <- ipc.ApprovalDecision{Allow: true, ID: "abcd"}
	waitHandled(t, handled, "family", ask.FileName())
	if n := m.holds("family"); n != 0 {
		t.Errorf("%d holds on family's turn after the answer; want 0", n)
	}
	if resp, ok := e.response(t, "family", ask.ID); !ok || !resp.OK {
		t.Errorf("approval response %+v, %v", resp, ok)
	}
}
