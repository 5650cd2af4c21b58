package runner

import (
	"time"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/bridged-app/bridged/internal/ipc"
)

// ledger is what the turns of a run have seen and settled: the messages
// written to claude that no result has answered yet, the cursors that order
// writes, turn starts (system/init) and results, the cost reported so far,
// the session reported to the host and the assistant message to resume at.
// It starts, stops and talks to no process: run feeds it what claude said
// and what was written, and acts on what it answers. It is owned by run's
// loop goroutine.
type ledger struct {
	// seq orders writes, turn starts and results; the last* cursors are the
	// seq of the latest of each in the current process.
	seq        uint64
	lastWrite  uint64
	lastResult uint64
	lastInit   uint64
	// outstanding are the messages written to claude that no result is
	// known to have answered: a result settles those written before its
	// turn began (its system/init); one written during a turn may be
	// queued or folded into it, so it stays until a later turn's result.
	outstanding []written
	// unconfirmed are the messages written before the current process
	// started its first turn: a CLI that does not know the session to
	// resume drops them all.
	unconfirmed []string
	sawInit     bool   // the current process started a turn
	unknownSes  bool   // the current process does not know its --resume session
	state       string // the last session_state_changed ("" after a result)
	resultAt    time.Time

	lastCost float64 // total_cost_usd of the current process so far
	lastUUID string  // the last assistant message to resume at ("" after compaction)
	procUUID string  // the current process's last assistant uuid, as last seen

	reported    string // last session id reported
	freshReport bool   // the next session report is a fresh replacement
}

// written is a message written to claude and the sequence number of the
// write.
type written struct {
	text string
	seq  uint64
}

// newLedger starts a ledger that resumes at the assistant message resumeAt
// ("" for none).
func newLedger(resumeAt string) *ledger {
	return &ledger{lastUUID: resumeAt}
}

// started records that a new claude process runs: what the last one saw of
// its turns no longer counts, and the messages still outstanding are the
// ones about to be written to it again.
func (l *ledger) started() {
	l.sawInit, l.unconfirmed, l.unknownSes, l.lastCost, l.state, l.procUUID = false, nil, false, 0, "", ""
	l.lastWrite, l.lastResult, l.lastInit = l.seq, l.seq, l.seq
	l.outstanding = nil
}

// wrote records a user message written to claude.
func (l *ledger) wrote(text string) {
	l.seq++
	l.lastWrite = l.seq
	l.outstanding = append(l.outstanding, written{text: text, seq: l.seq})
	if !l.sawInit {
		l.unconfirmed = append(l.unconfirmed, text)
	}
}

// undelivered records messages claude did not take (it died at once): they
// go to the next process with the rest.
func (l *ledger) undelivered(msgs []string) {
	l.unconfirmed = append(l.unconfirmed, msgs...)
	for _, m := range msgs {
		l.outstanding = append(l.outstanding, written{text: m, seq: l.seq})
	}
}

// turnStarted records a system/init: claude began a turn.
func (l *ledger) turnStarted() {
	l.sawInit = true
	l.unconfirmed = nil
	l.seq++
	l.lastInit = l.seq
}

// stateChanged records a session_state_changed.
func (l *ledger) stateChanged(state string) { l.state = state }

// compacted records a compact_boundary: resuming at a message from before
// the compaction would undo it.
func (l *ledger) compacted() { l.lastUUID = "" }

// unknownSession reports whether res is the CLI's start-up refusal of the
// session to resume, and records it if so: nothing written was answered.
func (l *ledger) unknownSession(res *claudecli.Result) bool {
	if l.sawInit || !res.UnknownSession() {
		return false
	}
	l.unknownSes = true
	return true
}

// result records a turn's result and returns the result event to report.
// lastAssistant is the uuid of the process's last top-level assistant
// message.
func (l *ledger) result(res *claudecli.Result, at time.Time, lastAssistant string) ipc.Event {
	l.seq++
	l.lastResult = l.seq
	l.resultAt = at
	l.settle()
	l.state = "" // a later session_state_changed says whether a queued turn runs
	cost, ok := res.TurnCostUSD()
	if !ok {
		cost = res.TotalCostUSD - l.lastCost
	}
	l.lastCost = res.TotalCostUSD
	if lastAssistant != l.procUUID {
		l.lastUUID, l.procUUID = lastAssistant, lastAssistant
	}
	return ipc.Event{
		Type:      ipc.EventResult,
		Text:      res.Text(),
		IsError:   res.IsError,
		SessionID: res.SessionID,
		LastUUID:  l.lastUUID,
		CostUSD:   cost,
		Usage: &ipc.Usage{
			InputTokens:              res.Usage.InputTokens,
			OutputTokens:             res.Usage.OutputTokens,
			CacheCreationInputTokens: res.Usage.CacheCreationInputTokens,
			CacheReadInputTokens:     res.Usage.CacheReadInputTokens,
		},
		DurationMS:     res.DurationMS,
		NumTurns:       res.NumTurns,
		APIErrorStatus: res.APIErrorStatus,
		APIErrorType:   res.APIErrorType,
	}
}

// settle forgets the outstanding messages written before the turn that just
// ended began.
func (l *ledger) settle() {
	i := 0
	for i < len(l.outstanding) && l.outstanding[i].seq < l.lastInit {
		i++
	}
	l.outstanding = l.outstanding[i:]
}

// report returns the session event to send for id, and false when there is
// nothing new to say.
func (l *ledger) report(id string) (ipc.Event, bool) {
	if id == "" || id == l.reported {
		return ipc.Event{}, false
	}
	l.reported = id
	ev := ipc.Event{Type: ipc.EventSession, SessionID: id, Fresh: l.freshReport}
	l.freshReport = false
	return ev, true
}

// freshSession records that the session is being replaced by a new one:
// there is no message to resume at, and the next session report says fresh.
func (l *ledger) freshSession() {
	l.lastUUID = ""
	l.freshReport = true
}

// inFlight reports whether claude may be working or about to work on a turn.
func (l *ledger) inFlight() bool {
	busy := l.state != "" && l.state != claudecli.StateIdle
	return l.lastWrite > l.lastResult || l.lastInit > l.lastResult || busy
}

// unanswered returns the messages no result has settled, in write order: the
// turn in flight and those written after it began.
func (l *ledger) unanswered() []string {
	msgs := make([]string, 0, len(l.outstanding))
	for _, w := range l.outstanding {
		msgs = append(msgs, w.text)
	}
	return msgs
}
