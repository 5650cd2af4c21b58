package agentrun

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/groupqueue"
)

func TestOutcomeFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Outcome
		want     string // "" : no failure
		wantTask string // "" : no failure of a task run
	}{
		{"one result, clean exit", Outcome{Results: 1}, "", ""},
		{"no result", Outcome{}, "without a result", "without a result"},
		{"agent error", Outcome{Results: 1, AgentErr: "API Error:\noverloaded"}, "agent error: API Error: overloaded", "agent error"},
		{"commit error", Outcome{Results: 1, CommitErr: errors.New("disk full")}, "could not store the reply: disk full", "could not store"},
		{"exit code after a result", Outcome{Results: 1, Ended: container.Ended{Exit: container.Exit{Code: 2}}}, "code 2", ""},
		{"hang", Outcome{Ended: container.Ended{TimedOut: true, Timeout: time.Minute}}, "container timeout (1m0s)", "container timeout"},
		{"no start", Outcome{Ended: container.Ended{TimedOut: true, NoStart: true, Timeout: time.Minute}}, "did not start", "did not start"},
		{"stopped", Outcome{Results: 1, Ended: container.Ended{Stopped: true}}, "stopped at shutdown", ""},
	} {
		check := func(what string, err error, want string) {
			switch {
			case want == "" && err != nil:
				t.Errorf("%s: %s: got %v; want none", tc.name, what, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s: %s: got %v; want one saying %q", tc.name, what, err, want)
			}
		}
		check("Failure", tc.o.Failure(), tc.want)
		check("TaskFailure", tc.o.TaskFailure(), tc.wantTask)
	}
}

// A hang keeps its text and is a hang to the queue; other failures are not.
func TestHangWrapsErrHang(t *testing.T) {
	err := hang{errors.New("run messages of fam: the agent printed nothing")}
	if !errors.Is(err, groupqueue.ErrHang) || err.Error() != "run messages of fam: the agent printed nothing" {
		t.Fatalf("got %v (is ErrHang: %v); want the text unchanged, wrapping ErrHang", err, errors.Is(err, groupqueue.ErrHang))
	}
	if errors.Is(errors.New("x"), groupqueue.ErrHang) {
		t.Fatal("a plain error is a hang")
	}
}

// A run error keeps its text, is found by type through the queue's hang
// class and any wrapping, and gives its cause as the reason.
func TestRunErrorReason(t *testing.T) {
	cause := errors.New("the agent printed nothing")
	err := fmt.Errorf("queue: %w", hang{NewRunError("fam", cause)})
	var re *RunError
	if !errors.As(err, &re) || re.Folder != "fam" || !errors.Is(err, cause) || !errors.Is(err, groupqueue.ErrHang) {
		t.Fatalf("errors.As(%v) = %+v; want the run error of fam, wrapping its cause, still a hang", err, re)
	}
	if got, want := re.Error(), "run messages of fam: the agent printed nothing"; got != want {
		t.Fatalf("text %q; want %q", got, want)
	}
	if got := Reason(err); got != "the agent printed nothing" {
		t.Fatalf("Reason = %q; want the cause alone", got)
	}
	if got := Reason(errors.New("panic: boom")); got != "panic: boom" {
		t.Fatalf("Reason of another error = %q; want its text", got)
	}
	if got := Reason(nil); got != "" {
		t.Fatalf("Reason(nil) = %q", got)
	}
}
