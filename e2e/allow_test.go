package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// postAs stores a message from another member of a local chat (not the
// owner) and returns its id, or the API's error.
func (e *env) postAs(chat, as, text string) (int64, error) {
	e.t.Helper()
	var res struct {
		ID int64 `json:"id"`
	}
	err := e.api("POST", "/v1/chats/"+url.PathEscape(chat)+"/messages", map[string]string{"as": as, "text": text}, &res)
	return res.ID, err
}

// Who may wake the agent, through the local channel with two senders: in a
// group that allows only local:carol, bob's message never starts a turn
// (bridged chat --as bob says why at once) and reaches the agent as context
// with carol's next turn; the owner always wakes it; `bridged why` says
// bob's sender was not allowed; with --others drop bob's message is not
// stored at all; `groups list` shows who is allowed. bob's `yes ID` in the
// main chat does not approve the group's open request; the owner's does.
func TestE2EOnlyAllowedSendersWakeTheAgent(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--name", "team", "--no-trigger", "local:team")
	e.mustCLI("groups", "set", "--allow", "local:carol", "team")
	if out := e.mustCLI("groups", "list"); !strings.Contains(out, "you, local:carol") {
		t.Errorf("groups list does not show team's allowed senders:\n%s", out)
	}
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := e.watchContainers(ctx)

	// bob is not allowed: no turn, said at once, kept as context.
	bob, err := e.postAs("local:team", "bob", "bob says the meeting moved to 3pm")
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code, _ := e.chatM("team", "bob again, still not allowed", "--as", "bob", "--timeout", "60s")
	if code != 3 || !strings.Contains(errs, "sender not allowed") || out != "" {
		t.Errorf("chat --as bob: exit %d, stdout %q, stderr %q; want exit 3 saying the sender is not allowed", code, out, errs)
	}
	if _, _, starts := watch.snapshot(); starts != 0 {
		t.Errorf("%d containers started for messages from a sender not allowed; want none", starts)
	}
	if got := e.outSince("local:team", 0); len(got) != 0 {
		t.Errorf("replies to a sender not allowed: %+v", got)
	}

	// carol is allowed: her turn sees bob's messages as context.
	carol, err := e.postAs("local:team", "carol", "fake:prompt")
	if err != nil {
		t.Fatal(err)
	}
	replies := e.waitOut("local:team", carol, 1, 90*time.Second)
	if !strings.Contains(replies[0].Text, `allowed="no">bob says the meeting moved to 3pm`) || !strings.Contains(replies[0].Text, "bob again") {
		t.Errorf("carol's turn did not see bob's messages as context:\n%s", replies[0].Text)
	}
	if got := e.outSince("local:team", bob); len(got) != 1 {
		t.Errorf("replies after bob's message: %+v; want only the one to carol", got)
	}

	// The owner always wakes the agent, whatever the list.
	if got := e.ask("local:team", "fake:reply the owner counts", 90*time.Second); got != "the owner counts" {
		t.Errorf("owner got %q; want the reply", got)
	}

	// An approval request of this ask group is answered by the owner
	// only: bob's `yes ID` in the main chat is an ordinary message there
	// (the main agent sees it) and the request stays open; the owner's
	// `yes ID` approves it and is no message.
	const wait = 90 * time.Second
	mainFrom := lastID(e, "local:main")
	cmd := e.post("local:team", "fake:bash touch team-made && echo team-did")
	req, reqMsg := e.waitApproval(mainFrom, wait)
	out, errs, code, _ = e.chatM("main", "yes "+req, "--as", "bob", "--timeout", "90s")
	if code != 0 || !strings.Contains(out, "yes "+req) {
		t.Errorf("chat --as bob -m 'yes %s' in main: exit %d, stdout %q, stderr %q; want an ordinary message the main agent answers", req, code, out, errs)
	}
	var bobsAnswer bool
	for _, m := range e.messages("local:main", reqMsg, 0) {
		if m.Direction == "in" && m.Text == "yes "+req && m.Sender == "bob" {
			bobsAnswer = true
		}
	}
	if !bobsAnswer {
		t.Errorf("bob's 'yes %s' is not stored in the main chat as his message: %+v", req, e.messages("local:main", reqMsg, 0))
	}
	if open := e.mustCLI("approvals", "--open"); !strings.Contains(open, req) {
		t.Fatalf("approvals --open after bob's yes:\n%s\nwant %s still open", open, req)
	}
	if exists(filepath.Join(e.home, "groups", "team", "team-made")) || len(e.outSince("local:team", cmd)) != 0 {
		t.Fatal("the command ran on bob's yes")
	}
	out, errs, code, _ = e.chatM("main", "yes "+req, "--timeout", "90s")
	if code != 0 || !strings.Contains(errs, "Taken as an answer to an approval request") {
		t.Errorf("owner's chat -m 'yes %s': exit %d, stdout %q, stderr %q; want taken as the answer", req, code, out, errs)
	}
	if got := e.waitOut("local:team", cmd, 1, wait)[0].Text; got != "team-did" {
		t.Fatalf("team got %q after the owner's yes; want team-did", got)
	}
	for _, m := range e.messages("local:main", reqMsg, 0) {
		if m.Direction == "in" && m.Sender != "bob" && strings.Contains(m.Text, req) {
			t.Errorf("the owner's answer was stored as a message: %+v", m)
		}
	}

	s := e.why(t, fmt.Sprint(bob))
	if s.Woke || !strings.Contains(s.Why, "sender not allowed") || s.Message.Sender != "local:bob" {
		t.Errorf("why bob's message: woke %v, why %q, sender %q; want not woken, sender not allowed, local:bob\n%s", s.Woke, s.Why, s.Message.Sender, s)
	}
	hasStep(t, "bob", s, "trigger", "not_matched", "sender not allowed")

	// --others drop: bob's message is refused and nothing is stored.
	e.mustCLI("groups", "set", "--others", "drop", "team")
	last := e.messages("local:team", 0, 0)
	before := last[len(last)-1].ID
	if _, err := e.postAs("local:team", "bob", "dropped on the floor"); err == nil || !strings.Contains(err.Error(), "sender not allowed") {
		t.Errorf("post as bob with --others drop: %v; want a refusal saying the sender is not allowed", err)
	}
	if got := e.messages("local:team", before, 0); len(got) != 0 {
		t.Errorf("stored after a dropped message: %+v; want nothing", got)
	}
	if out := e.mustCLI("groups", "list"); !strings.Contains(out, "you, local:carol (others dropped)") {
		t.Errorf("groups list does not say others are dropped:\n%s", out)
	}
	// The owner still counts.
	if got := e.ask("local:team", "fake:reply still here", 90*time.Second); got != "still here" {
		t.Errorf("owner got %q after --others drop; want the reply", got)
	}

	// everyone: bob wakes the agent again.
	e.mustCLI("groups", "set", "--allow", "everyone", "team")
	id, err := e.postAs("local:team", "bob", "fake:reply bob is welcome")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitOut("local:team", id, 1, 90*time.Second)[0].Text; got != "bob is welcome" {
		t.Errorf("bob got %q with everyone allowed; want the reply", got)
	}
	d.stop(t)
}
