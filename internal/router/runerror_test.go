package router

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/groupqueue"
	"github.com/bridged-app/bridged/internal/store"
)

// A failed run's reason reaches status and the chat's notice as the run
// error's reason, without the folder, however the error was wrapped on its
// way: it is found by type, not by the text it starts with.
func TestRunErrorReasonReachesNotice(t *testing.T) {
	h := newHarness(t, nil)
	h.start()
	cause := errors.New("the agent printed nothing")
	err := fmt.Errorf("attempt ended: %w", agentrun.NewRunError("main", cause))

	h.r.runs.Outcome("main", groupqueue.Outcome[store.Task]{Event: groupqueue.Retrying, Err: err, Attempt: 1, Attempts: 2})
	f, ok := retryingFailure(h)
	if !ok || !strings.HasSuffix(f.Error, "retrying: the agent printed nothing") {
		t.Fatalf("status failures %+v; want the retrying turn saying only its reason", h.r.Status().Failures)
	}

	h.r.runs.Outcome("main", groupqueue.Outcome[store.Task]{Event: groupqueue.GaveUp, Err: err, Attempt: 2, Attempts: 2})
	notice := h.nextSend()
	if !strings.Contains(notice.Text, "failed 2 times in a row (the agent printed nothing)") || strings.Contains(notice.Text, "run messages of") {
		t.Fatalf("notice %q; want it to give the reason alone", notice.Text)
	}
}
