package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// story is `bridged why --json` as the tests read it.
type story struct {
	Message struct {
		ID       int64      `json:"id"`
		Chat     string     `json:"chat"`
		Channel  string     `json:"channel"`
		Sender   string     `json:"sender"`
		StoredAt *time.Time `json:"stored_at"`
	} `json:"message"`
	Group string `json:"group"`
	Woke  bool   `json:"woke"`
	Why   string `json:"why"`
	Steps []struct {
		Step   string     `json:"step"`
		At     *time.Time `json:"at"`
		State  string     `json:"state"`
		Detail string     `json:"detail"`
	} `json:"steps"`
}

// steps returns the steps named step, as "state: detail".
func (s story) steps(step string) []string {
	var out []string
	for _, st := range s.Steps {
		if st.Step == step {
			out = append(out, st.State+": "+st.Detail)
		}
	}
	return out
}

func (s story) String() string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}

// why runs `bridged why ARGS --json`.
func (e *env) why(t *testing.T, args ...string) story {
	t.Helper()
	out := e.mustCLI(append([]string{"why", "--json"}, args...)...)
	var s story
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("bridged why --json: %v\n%s", err, out)
	}
	return s
}

// hasStep fails unless s has a step named step whose "state: detail"
// contains each of want.
func hasStep(t *testing.T, name string, s story, step string, want ...string) {
	t.Helper()
	for _, got := range s.steps(step) {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: no %s step with %q in the story:\n%s", name, step, want, s)
}

// `bridged why` tells one message's life from what is stored, with the
// daemon running and with it stopped: an answered message, one without the
// trigger, one in a group paused by its budget, one whose turn failed and
// was retried, one whose reply could not be sent. (A sender not allowed:
// TestE2EOnlyAllowedSendersWakeTheAgent.)
func TestE2EWhyTellsAMessagesStory(t *testing.T) {
	parallel(t, light)
	up := newPricedUpstream(t)
	e := newEnv(t, "--idle-timeout", "2m", "--retry-base", "100ms")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.srv.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "local:fam") // needs the trigger @Andy
	e.mustCLI("groups", "add", "--tools", "full", "--name", "paid", "--no-trigger", "local:paid")
	e.mustCLI("groups", "set", "--budget-daily", "0.0001", "paid") // one metered call uses it up
	e.mustCLI("groups", "add", "--tools", "full", "--name", "crashy", "--no-trigger", "local:crashy")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "ghost", "--no-trigger", "120363000000000001@g.us") // no channel can send to it
	d := e.start()

	// Answered.
	answered := e.post("local:fam", "@Andy fake:reply hello there")
	if got := e.waitOut("local:fam", answered, 1, 90*time.Second)[0].Text; got != "hello there" {
		t.Fatalf("fam got %q; want the reply", got)
	}
	// Another, taken by the same container.
	again := e.post("local:fam", "@Andy fake:reply again")
	if got := e.waitOut("local:fam", again, 1, 90*time.Second)[0].Text; got != "again" {
		t.Fatalf("fam got %q; want the second reply", got)
	}
	// Without the trigger: it waits as context.
	plain := e.post("local:fam", "just chatting, no trigger")

	// Paused by the budget: the first turn's metered call uses it up; the
	// next message waits.
	first := e.post("local:paid", "fake:api first")
	e.waitOut("local:paid", first, 2, 90*time.Second) // the reply and the pause notice
	paused := e.post("local:paid", "fake:reply second")

	// Failed and retried: claude dies on every attempt; after the retries
	// the chat gets one notice.
	crashed := e.post("local:crashy", "fake:crash")
	if got := e.waitOut("local:crashy", crashed, 1, 3*time.Minute)[0].Text; !strings.Contains(got, "failed 6 times") {
		t.Fatalf("crashy got %q; want the notice that the agent failed 6 times", got)
	}

	// A reply that cannot be sent: the main agent sends to a chat no
	// channel handles.
	sendFail := e.post("local:main", `fake:tool send_message {"text":"to the ghost","target_chat":"120363000000000001@g.us"}`+"\nfake:reply done")
	e.waitOut("local:main", sendFail, 1, 90*time.Second)

	check := func(t *testing.T, how string) {
		s := e.why(t, fmt.Sprint(answered))
		if !s.Woke || s.Group != "fam" || s.Message.Channel != "local" || s.Message.Sender != "Alice" || s.Message.StoredAt == nil {
			t.Errorf("%s: answered message: woke %v, group %q, channel %q, sender %q, stored %v; want woke, fam, local, Alice, a stored time\n%s",
				how, s.Woke, s.Group, s.Message.Channel, s.Message.Sender, s.Message.StoredAt, s)
		}
		hasStep(t, how+": answered", s, "trigger", "matched", "@Andy")
		hasStep(t, how+": answered", s, "turn", "done", "answered")
		hasStep(t, how+": answered", s, "reply", "sent", "hello there")

		if how == "running" {
			hasStep(t, how+": answered", s, "container", "started")
			hasStep(t, how+": again", e.why(t, fmt.Sprint(again)), "container", "reused")
		} else {
			hasStep(t, how+": answered", s, "container", "not recorded")
		}

		s = e.why(t, "last", "--chat", "fam")
		if s.Message.ID != plain || s.Woke {
			t.Errorf("%s: last of fam is #%d woke %v; want #%d, not woken\n%s", how, s.Message.ID, s.Woke, plain, s)
		}
		hasStep(t, how+": no trigger", s, "trigger", "not_matched", "no trigger word", "@Andy")
		hasStep(t, how+": no trigger", s, "handed", "waiting")

		s = e.why(t, fmt.Sprint(paused))
		hasStep(t, how+": paused", s, "budget", "paused", "daily budget", "0.0001")
		hasStep(t, how+": paused", s, "handed", "waiting")
		s = e.why(t, fmt.Sprint(first), "--chat", "local:paid")
		hasStep(t, how+": paid", s, "cost", "over 1 Claude API requests")
		hasStep(t, how+": paid", s, "notice", "sent", "pausing until midnight")

		s = e.why(t, fmt.Sprint(crashed))
		hasStep(t, how+": crashed", s, "turn", "failed", "attempt 1 of 6 failed, retried", "status 2")
		hasStep(t, how+": crashed", s, "turn", "failed", "attempt 5 of 6 failed, retried")
		hasStep(t, how+": crashed", s, "turn", "gave_up", "after 6 attempts")
		hasStep(t, how+": crashed", s, "notice", "sent", "failed 6 times")
		hasStep(t, how+": crashed", s, "handed", ": handed to the agent, but no turn committed")

		s = e.why(t, fmt.Sprint(sendFail))
		hasStep(t, how+": send failed", s, "reply", "failed", "to 120363000000000001@g.us")
		hasStep(t, how+": send failed", s, "reply", "sent", "done")

		t.Logf("bridged why %d (%s):\n%s", crashed, how, e.mustCLI("why", fmt.Sprint(crashed)))
		human := e.mustCLI("why", fmt.Sprint(plain))
		if !strings.Contains(human, "did not wake the agent: no trigger word") || !strings.Contains(human, "not recorded") {
			t.Errorf("%s: bridged why %d:\n%s\nwant the verdict and the steps not recorded said", how, plain, human)
		}
	}
	t.Run("daemon running", func(t *testing.T) {
		check(t, "running")
		var s story
		if err := e.api("GET", fmt.Sprintf("/v1/messages/%d/story", answered), nil, &s); err != nil || s.Message.ID != answered {
			t.Errorf("GET /v1/messages/%d/story: %v, message #%d", answered, err, s.Message.ID)
		}
		if err := e.api("GET", "/v1/messages/nope/story", nil, &s); err == nil || !strings.Contains(err.Error(), "want a message id") {
			t.Errorf("GET /v1/messages/nope/story: %v; want a clear refusal", err)
		}

		// The metrics carry each group's figures of today and the
		// runtime's own.
		resp, err := e.http.Get("http://bridged/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`bridged_group_budget_paused{group="paid"} 1`, `bridged_group_messages_today{group="fam",direction="in"} 3`,
			`bridged_group_messages_today{group="fam",direction="out"} 2`, `bridged_group_budget_usd_daily{group="paid"} 0.0001`,
			"\ngo_goroutines ", "\nprocess_open_fds ", "\ngo_gc_cycles_total "} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
		if !strings.Contains(string(body), `bridged_group_cost_usd_today{group="paid"} 0.`) {
			t.Errorf("/metrics lacks paid's cost today:\n%s", body)
		}
	})
	d.stop(t)
	t.Run("daemon stopped", func(t *testing.T) { check(t, "stopped") })
}

// `bridged why` tells the daily budget's word as it was given, with the
// figures of that moment: a turn whose API request the proxy refused at
// the budget, and a message the budget held, keep their budget steps after
// the budget was raised (the held message then answered) and lifted.
func TestE2EWhyKeepsTheBudgetOfItsTime(t *testing.T) {
	parallel(t, light)
	_, e := budgetEnv(t, "5m", "1.50")
	d := e.start()

	// Two calls answered ($1.80 of $1.50), the third refused by the proxy.
	spent := e.post("local:fam", "fake:bash "+apiCalls(3))
	e.waitOut("local:fam", spent, 2, 120*time.Second) // the reply and the pause notice
	held := e.post("local:fam", "fake:reply held back")
	deadline := time.Now().Add(30 * time.Second)
	for s := e.why(t, fmt.Sprint(held)); len(s.steps("budget")) == 0; s = e.why(t, fmt.Sprint(held)) {
		if time.Now().After(deadline) {
			t.Fatalf("no budget step for the held message within 30s:\n%s", s)
		}
		e.messages("local:fam", held, 200*time.Millisecond) // a short wait on the chat, not a sleep
	}
	e.mustCLI("groups", "set", "--budget-daily", "5", "fam")
	if got := e.waitOut("local:fam", held, 1, 90*time.Second)[0].Text; got != "held back" {
		t.Fatalf("after the raise fam got %q; want the held message answered", got)
	}
	e.mustCLI("groups", "set", "--budget-daily", "0", "fam")

	check := func(t *testing.T, how string) {
		s := e.why(t, fmt.Sprint(spent))
		hasStep(t, how+": refused", s, "budget", "refused", "refused by the daily budget", "$1.8000 of $1.5 spent")
		hasStep(t, how+": refused", s, "budget", ": within the daily budget", "$0.0000 of $1.5 spent")
		s = e.why(t, fmt.Sprint(held))
		hasStep(t, how+": held", s, "budget", "paused", "paused by its daily budget", "$1.8000 of $1.5 spent")
		hasStep(t, how+": held", s, "budget", ": let through", "$1.8000 of $5 spent")
		hasStep(t, how+": held", s, "turn", "done")
		if human := e.mustCLI("why", fmt.Sprint(held)); !strings.Contains(human, "$1.8000 of $1.5") {
			t.Errorf("%s: bridged why %d:\n%s\nwant the budget of the time", how, held, human)
		}
	}
	t.Run("daemon running", func(t *testing.T) { check(t, "running") })
	d.stop(t)
	t.Run("daemon stopped", func(t *testing.T) { check(t, "stopped") })
}
