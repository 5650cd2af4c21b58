package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

// The agent's WebFetch and WebSearch calls, as the CLI prints them, are
// told to the host (the URL, the query, clipped); other tools are not.
func TestFetchedFromToolUse(t *testing.T) {
	long := "https://a.example/" + strings.Repeat("é", 200)
	var a claudecli.Assistant
	line := `{"message":{"content":[{"type":"text","text":"let me look"},
		{"type":"tool_use","id":"t1","name":"WebFetch","input":{"url":"https://evil.example/","prompt":"rules"}},
		{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/x"}},
		{"type":"tool_use","id":"t3","name":"WebSearch","input":{"query":"dog names"}},
		{"type":"tool_use","id":"t4","name":"WebFetch","input":{"url":"` + long + `"}}]}}`
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatal(err)
	}
	evs := fetched(a.Message.Content)
	if len(evs) != 3 || evs[0] != (ipc.Event{Type: ipc.EventFetched, Tool: "WebFetch", What: "https://evil.example/"}) ||
		evs[1] != (ipc.Event{Type: ipc.EventFetched, Tool: "WebSearch", What: "dog names"}) {
		t.Fatalf("events = %+v", evs)
	}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if _, err := ipc.DecodeEvent(b); err != nil {
			t.Errorf("the host refuses %s: %v", b, err)
		}
	}
}
