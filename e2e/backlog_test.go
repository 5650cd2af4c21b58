package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A backlog larger than the prompt cap is answered, and the people in the
// chat learn in one line how many older messages the agent did not read
// (issue 10, item 7).
func TestE2EBacklogLeftOutNotice(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--prompt-cap", "3", "--idle-timeout", "2s")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "local:fam") // requires the trigger
	d := e.start()
	first := int64(0)
	for i := range 8 {
		id := e.post("local:fam", fmt.Sprintf("chatter %d", i))
		if i == 0 {
			first = id - 1
		}
	}
	e.post("local:fam", "@Andy fake:reply caught up")

	out := e.waitOut("local:fam", first, 2, 2*time.Minute)
	if want := "Note: 6 older messages were left out of what I read."; out[0].Text != want {
		t.Errorf("first message to the chat %q; want %q", out[0].Text, want)
	}
	if out[1].Text != "caught up" {
		t.Errorf("second message to the chat %q; want the reply", out[1].Text)
	}
	// Nothing else: one notice, one reply.
	for _, m := range e.messages("local:fam", out[1].ID, 3*time.Second) {
		if m.Direction == "out" {
			t.Errorf("another message to the chat: %+v", m)
		}
	}
	if n := strings.Count(d.logs(), "older messages left out of the prompt"); n != 1 {
		t.Errorf("the daemon logged %d left-out notices; want 1", n)
	}
	d.stop(t)
}
