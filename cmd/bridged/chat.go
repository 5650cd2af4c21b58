package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/remotecontrol"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// attachCommand starts an interactive line that sends a file.
const attachCommand = "/attach "

// helpCommand is the interactive line answered by the chat itself, never
// sent to the agent.
const helpCommand = "/help"

// chatHelp is what /help prints.
const chatHelp = `bridged chat: each line you type is a message to the agent.
  /attach FILE  send a file (an image or a document lands in the group's inbox/, audio is transcribed)
  /help         this help (answered here, not sent to the agent)
  Ctrl-D        end the chat (after the last turn's replies)
`

// pollWait is how long one long-poll asks the daemon to wait.
const pollWait = 30 * time.Second

type chatOpts struct {
	client  *control.Client
	chat    string
	name    string // the group's display name
	sender  string
	as      string // post as this other member of the chat, not the owner
	timeout time.Duration
	quiet   time.Duration
}

func (a *app) cmdChat(ctx context.Context, args []string) error {
	fs := a.newFlagSet("chat", "chat [-m TEXT] [--attach FILE]... [--timeout D] [flags] [GROUP]\n\nGROUP is a folder, a chat id or a group's name; without it, the main group.")
	msg := fs.String("m", "", "send this one message, print the reply or replies, and exit")
	var attach fileFlags
	fs.Var(&attach, "attach", "send `FILE` with the -m message (repeatable): each file is a message of its own, the first captioned with the text; images and documents land in the group's inbox/, audio is transcribed like a voice note")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up waiting for a reply after this long")
	quiet := fs.Duration("quiet", 0, "after the agent's turn ended, keep printing messages it sends later until this long passes without one")
	sender := fs.String("sender", "", "your name in the chat (default $USER)")
	as := fs.String("as", "", "post as another member of the chat named `NAME` (sender local:NAME), not as you: the group's allow list decides whether it wakes the agent")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	for _, f := range attach {
		if err := checkAttachment(f); err != nil {
			return err
		}
	}
	if *timeout <= 0 || *quiet < 0 {
		fmt.Fprintln(a.stderr, "bridged chat: --timeout must be positive and --quiet not negative")
		return errUsage
	}
	cfg, err := a.resolveClient(cf)
	if err != nil {
		return err
	}
	c := control.NewClient(cfg.Socket())
	running, err := daemonRunning(ctx, c, cfg.Socket())
	if err != nil {
		return err
	}
	if !running {
		return fmt.Errorf("bridged is not running in %s: start it with `bridged run`", cfg.Home)
	}
	g, err := findGroup(ctx, c, pos)
	if err != nil {
		return err
	}
	if !control.IsLocalChat(g.Chat) {
		return fmt.Errorf("group %s is a WhatsApp chat; talk to it in WhatsApp", g.Folder)
	}
	o := chatOpts{client: c, chat: g.Chat, name: g.Name, sender: *sender, as: *as, timeout: *timeout, quiet: *quiet}
	if o.sender == "" {
		if o.sender = a.getenv("USER"); o.sender == "" {
			o.sender = "you"
		}
	}
	if *msg != "" || len(attach) > 0 {
		return a.chatOnce(ctx, o, *msg, attach...)
	}
	return a.chatInteractive(ctx, o, cfg.AssistantName)
}

// fileFlags collects a repeated flag's values.
type fileFlags []string

var _ flag.Value = (*fileFlags)(nil)

func (f *fileFlags) String() string { return strings.Join(*f, ",") }

func (f *fileFlags) Set(s string) error {
	if s == "" {
		return errors.New("empty file name")
	}
	*f = append(*f, s)
	return nil
}

// checkAttachment checks that path is a file this user can read, before
// anything is posted.
func checkAttachment(path string) error {
	f, err := control.OpenAttachment(path)
	if err == nil {
		f.Close()
	}
	return err
}

// groupFinder finds the registered groups a name names (the daemon's API,
// or the database when it is stopped).
type groupFinder interface {
	FindGroups(ctx context.Context, name string) ([]control.Group, error)
}

// findGroup returns the group pos[0] names, or the main group: pos[0] is
// a folder, a chat id, or a group's name (exactly, else ignoring case:
// control.MatchGroups); a name two groups share is refused with their
// folders. Only the groups named are asked for, so it costs the same
// however many groups are registered.
func findGroup(ctx context.Context, c groupFinder, pos []string) (control.Group, error) {
	want := ""
	if len(pos) > 0 {
		want = pos[0]
	}
	found, err := c.FindGroups(ctx, want)
	if err != nil {
		return control.Group{}, err
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && want == "":
		return control.Group{}, errors.New("no main group is registered: name a GROUP, or add one with `bridged groups add --name main --main local:main`")
	case len(found) == 0:
		return control.Group{}, fmt.Errorf("no group with folder, chat id or name %q (see `bridged groups list`)", want)
	}
	folders := make([]string, len(found))
	for i, g := range found {
		folders[i] = g.Folder
	}
	return control.Group{}, fmt.Errorf("%q names %d groups (folders %s): name the folder", want, len(found), strings.Join(folders, ", "))
}

// post posts text (and files) as the owner, or as o.as.
func (o chatOpts) post(ctx context.Context, text string, files ...string) (int64, error) {
	return o.client.Post(ctx, o.chat, control.PostMessage{Sender: o.sender, As: o.as, Text: text}, files...)
}

// chatOnce posts text (with files, one message per file, the first
// captioned with text), prints every reply of the agent's turn that took it,
// and returns when that turn ended: nil when it was answered, an error with
// the reason when bridged gave up on it. A failed attempt that is retried
// is told on stderr and waited through. With o.quiet, messages sent after
// the turn are printed until o.quiet passes without one.
func (a *app) chatOnce(ctx context.Context, o chatOpts, text string, files ...string) error {
	id, err := o.post(ctx, text, files...)
	if err != nil {
		return err
	}
	if id == 0 {
		if _, ok := remotecontrol.Parse(text); ok {
			fmt.Fprintln(a.stderr, "Taken by bridged as a /remote-control command; no turn runs for it. Its answer is posted in the main chat (`bridged chat main` shows it).")
			return nil
		}
		fmt.Fprintln(a.stderr, "Taken as an answer to an approval request; no turn runs for it.")
		return nil
	}
	deadline := time.Now().Add(o.timeout)
	printed := id
	show := func(ms []control.ChatMessage) {
		for _, m := range ms {
			if m.Direction == control.Out && m.ID > printed {
				fmt.Fprintln(a.stdout, termsafe.Text(m.Text))
				printed = m.ID
			}
		}
	}
	var since uint64
	queued := false
	// While the turn waits for the owner's approval, the timeout stands
	// still: the wait is the owner's, not the agent's.
	var seen []string
	var waitingSince time.Time
	for {
		remaining := time.Until(deadline)
		if !waitingSince.IsZero() {
			remaining = pollWait
		} else if remaining <= 0 {
			return fmt.Errorf("no reply from %s within %s", o.name, o.timeout)
		}
		t, err := o.client.TurnWatch(ctx, o.chat, id, since, min(pollWait, remaining), queued, seen)
		if err != nil {
			return err
		}
		show(t.Replies)
		seen = a.approvalWaits(seen, t.Approvals, "bridged chat: waiting for approval %[1]s: `bridged approve %[1]s` (or `bridged deny %[1]s`)\n")
		switch {
		case len(seen) > 0 && waitingSince.IsZero():
			waitingSince = time.Now()
		case len(seen) == 0 && !waitingSince.IsZero():
			deadline = deadline.Add(time.Since(waitingSince))
			waitingSince = time.Time{}
		}
		switch t.State {
		case control.TurnNotTriggered:
			return fmt.Errorf("%w: %s: %s; the message is kept as context for the next one that has it", errNotTriggered, o.name, t.Reason)
		case control.TurnBudgetPaused:
			return fmt.Errorf("%w: %s: %s; the message waits", errBudgetPaused, o.name, t.Reason)
		case control.TurnQueued:
			fmt.Fprintf(a.stderr, "bridged chat: %s is %s; waiting\n", termsafe.Line(o.name), termsafe.Text(t.Reason))
			queued = true
			continue
		case control.TurnFailed:
			fmt.Fprintf(a.stderr, "bridged chat: attempt %d of %d failed (%s); bridged tries again\n", t.Attempt, t.Attempts, termsafe.Text(t.Error))
			since = t.Seq
			continue
		case control.TurnGaveUp:
			attempts := fmt.Sprintf("%d attempts", t.Attempt)
			if t.Attempt == 1 {
				attempts = "its first attempt" // not run again: the agent had answered or acted
			}
			return fmt.Errorf("%w (%s gave up after %s): %s", errTurnFailed, o.name, attempts, t.Error)
		case control.TurnDone:
		default:
			continue
		}
		if o.quiet == 0 {
			return nil
		}
		for {
			msgs, err := o.client.Messages(ctx, o.chat, printed, o.quiet)
			if err != nil {
				return err
			}
			before := printed
			show(msgs)
			if printed == before {
				return nil
			}
		}
	}
}

// approvalWaits tells, with format (its one argument is the request's
// id), each approval in open that is not in seen, and returns the ids of
// open: those the caller was told of.
func (a *app) approvalWaits(seen []string, open []control.Approval, format string) []string {
	ids := make([]string, 0, len(open))
	for _, ap := range open {
		if !slices.Contains(seen, ap.ID) {
			fmt.Fprintf(a.stderr, format, ap.ID)
		}
		ids = append(ids, ap.ID)
	}
	return ids
}

// errTurnFailed is the error of a turn bridged gave up on.
var errTurnFailed = errors.New("the agent's turn failed")

// Errors (and exit statuses) of `chat -m` for a message that will not start
// a turn: the group needs its trigger, or is paused by its budget.
var (
	errNotTriggered = errors.New("no turn")
	errBudgetPaused = errors.New("no turn")
)

// Exit statuses of `chat -m` besides 0 (answered), 1 (failed, no reply in
// time, or another error) and 2 (usage).
const (
	exitNotTriggered = 3
	exitBudgetPaused = 4
)

type pollResult struct {
	msgs []control.ChatMessage
	err  error
}

// turnResult is one end of a posted message's turn, or the error that
// stopped watching it.
type turnResult struct {
	id   int64
	turn control.Turn
	err  error
}

// watchTurn reports every end of the turn that took message id on ends
// (failed attempts too) until one is final, an error happens, or ctx ends.
// Each change of the approvals the turn waits for is reported too, in state
// TurnAwaitingApproval with the approvals open now (none: the wait ended).
func watchTurn(ctx context.Context, o chatOpts, id int64, ends chan<- turnResult) {
	var since uint64
	queued := false
	var seen []string
	for {
		t, err := o.client.TurnWatch(ctx, o.chat, id, since, pollWait, queued, seen)
		if ctx.Err() != nil {
			return
		}
		if err == nil && (t.State == control.TurnRunning || t.State == control.TurnAwaitingApproval) {
			ids := make([]string, 0, len(t.Approvals))
			for _, ap := range t.Approvals {
				ids = append(ids, ap.ID)
			}
			if slices.Equal(ids, seen) {
				continue
			}
			seen = ids
			t.State = control.TurnAwaitingApproval // none left: the wait ended
		}
		select {
		case ends <- turnResult{id, t, err}:
		case <-ctx.Done():
			return
		}
		if err != nil || t.Ended() || t.WillNotStart() {
			return
		}
		if t.State == control.TurnAwaitingApproval {
			continue
		}
		if t.State == control.TurnQueued {
			queued = true
			continue
		}
		since = t.Seq
	}
}

// thinking is the "thinking…" line shown while a turn runs: on a terminal
// it is erased before the next line is printed and shown again after it
// while the turn still runs; elsewhere it is one line per message posted.
type thinking struct {
	w     io.Writer
	tty   bool
	shown bool
	said  bool // not a terminal: said for the last message posted
}

// posted starts the line for a new message's turn.
func (t *thinking) posted() {
	t.said = false
	t.show()
}

// show writes the line: on a terminal once until cleared; elsewhere once
// for each message posted, whether or not an earlier turn's line was
// cleared by a reply yet.
func (t *thinking) show() {
	if (t.tty && t.shown) || (!t.tty && t.said) {
		return
	}
	t.shown, t.said = true, true
	if t.tty {
		fmt.Fprint(t.w, "thinking…")
		return
	}
	fmt.Fprintln(t.w, "thinking…")
}

func (t *thinking) clear() {
	if t.shown && t.tty {
		fmt.Fprint(t.w, "\r\x1b[K")
	}
	t.shown = false
}

// chatInteractive reads lines from stdin and posts each one, printing
// messages as they arrive and "thinking…" while a turn runs. At the end of
// input it waits for the end of the last message's turn (and its replies),
// then like chatOnce for o.quiet.
func (a *app) chatInteractive(ctx context.Context, o chatOpts, assistant string) error {
	after, err := latestID(ctx, o)
	if err != nil {
		return err
	}
	who := o.sender
	if o.as != "" {
		who = o.as + " (local:" + o.as + ", not you: the group's allow list decides whether it wakes the agent)"
	}
	fmt.Fprintf(a.stderr, "Talking to %s (%s) as %s. Type a message and press Enter; /attach FILE sends a file; /help; Ctrl-D ends.\n", o.name, o.chat, who)

	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	polls := make(chan pollResult)
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := after
		for {
			msgs, err := o.client.Messages(pctx, o.chat, next, pollWait)
			if pctx.Err() != nil {
				return
			}
			select {
			case polls <- pollResult{msgs, err}:
			case <-pctx.Done():
				return
			}
			if err != nil {
				return
			}
			if len(msgs) > 0 {
				next = msgs[len(msgs)-1].ID
			}
		}
	}()

	// The reader ends at the end of input; a read blocked on a terminal
	// cannot be interrupted, so it is not waited for.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(a.stdin)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-pctx.Done():
				return
			}
		}
	}()

	think := &thinking{w: a.stderr, tty: isTerminal(a.stderr)}
	defer think.clear()
	ends := make(chan turnResult)
	posted := make(map[int64]bool)
	asked := make(map[string]bool)  // approvals shown as waiting, not answered here
	told := make(map[string]bool)   // approvals shown as waiting
	running := make(map[int64]bool) // posted messages whose turn has not ended
	var lastPost, shown, need int64 // need: the last reply of the last turn, once it ended
	lastEnded := false
	var quietC, deadlineC <-chan time.Time
	var deadline *time.Timer        // after the end of input: the last turn's time
	waiting := make(map[int64]bool) // posted messages whose turn waits for an approval
	var quietT *time.Timer
	eof := false
	// finished reports whether, after the end of input, everything the last
	// turn said has been shown.
	finished := func() bool { return eof && lastEnded && shown >= need }
	startQuiet := func() {
		if o.quiet == 0 {
			return
		}
		if quietT == nil {
			quietT = time.NewTimer(o.quiet)
		} else {
			quietT.Reset(o.quiet)
		}
		quietC = quietT.C
	}
	defer func() {
		if quietT != nil {
			quietT.Stop()
		}
	}()
	for {
		if finished() && o.quiet == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				lines = nil
				eof = true
				if lastPost == 0 || a.stdinTerminal() {
					// Ctrl-D on a terminal ends the chat at once, even
					// while a turn runs: its replies stay in the chat.
					return nil
				}
				deadline = time.NewTimer(o.timeout)
				defer deadline.Stop()
				deadlineC = deadline.C
				if waiting[lastPost] {
					deadline.Stop() // the owner's time does not count
					deadlineC = nil
				}
				if finished() {
					startQuiet()
				}
				continue
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			if strings.TrimSpace(line) == helpCommand {
				think.clear()
				fmt.Fprint(a.stderr, chatHelp)
				continue
			}
			text, files := line, []string(nil)
			if rest, ok := strings.CutPrefix(line, attachCommand); ok {
				text, files = "", []string{strings.TrimSpace(rest)}
				if err := checkAttachment(files[0]); err != nil {
					think.clear()
					fmt.Fprintf(a.stderr, "bridged chat: %s\n", termsafe.Text(err.Error()))
					continue
				}
			}
			if ap, allow, ok := approvalAnswer(line, asked); ok {
				// An answer to an approval this chat showed: decided here,
				// whichever chat it is (in the main chat bridged would take
				// it as one too).
				think.clear()
				if _, err := o.client.DecideApproval(ctx, ap, allow, false); err != nil {
					fmt.Fprintf(a.stderr, "bridged chat: %v\n", err)
				} else {
					fmt.Fprintf(a.stderr, "(approval %s answered)\n", ap)
				}
				delete(asked, ap)
				if len(running) > 0 {
					think.show()
				}
				continue
			}
			id, err := o.post(ctx, text, files...)
			if err != nil {
				return err
			}
			if id == 0 {
				// The main chat took it as the answer to an approval
				// request: no turn runs for it.
				think.clear()
				if _, ok := remotecontrol.Parse(text); ok {
					fmt.Fprintln(a.stderr, "(taken by bridged as a /remote-control command; its answer follows)")
				} else {
					fmt.Fprintln(a.stderr, "(taken as an answer to an approval request)")
				}
				if len(running) > 0 {
					think.show()
				}
				continue
			}
			posted[id] = true
			running[id] = true
			lastPost, lastEnded, need = id, false, 0
			think.posted()
			wg.Add(1)
			go func() {
				defer wg.Done()
				watchTurn(pctx, o, id, ends)
			}()
		case r := <-polls:
			if r.err != nil {
				return r.err
			}
			for _, m := range r.msgs {
				think.clear()
				switch {
				case m.Direction == control.Out:
					name := m.Sender
					if name == "" {
						name = assistant
					}
					fmt.Fprintf(a.stdout, "%s: %s\n", termsafe.Line(name), termsafe.Text(m.Text))
				case !posted[m.ID]:
					fmt.Fprintf(a.stdout, "%s: %s\n", termsafe.Line(m.Sender), termsafe.Text(m.Text))
				}
				shown = max(shown, m.ID)
			}
			if len(running) > 0 {
				think.show()
			}
			if finished() {
				startQuiet()
			}
		case e := <-ends:
			if e.err != nil {
				return e.err
			}
			if e.turn.State == control.TurnFailed {
				think.clear()
				fmt.Fprintf(a.stderr, "(attempt %d of %d failed: %s; bridged tries again)\n", e.turn.Attempt, e.turn.Attempts, termsafe.Text(e.turn.Error))
				think.show()
				continue
			}
			if e.turn.State == control.TurnAwaitingApproval {
				think.clear()
				for _, ap := range e.turn.Approvals {
					if !told[ap.ID] {
						told[ap.ID], asked[ap.ID] = true, true
						fmt.Fprintf(a.stderr, "(waiting for approval %[1]s: type `yes %[1]s` or `no %[1]s`)\n", ap.ID)
					}
				}
				think.show()
				// While the last turn waits for the owner, the time
				// after the end of input does not run; it starts over
				// once the wait ends.
				was := waiting[e.id]
				waiting[e.id] = len(e.turn.Approvals) > 0
				if e.id == lastPost && deadline != nil && was != waiting[e.id] {
					if waiting[e.id] {
						deadline.Stop()
						deadlineC = nil
					} else {
						deadline.Reset(o.timeout)
						deadlineC = deadline.C
					}
				}
				continue
			}
			if e.turn.State == control.TurnQueued {
				think.clear()
				fmt.Fprintf(a.stderr, "(%s)\n", termsafe.Text(e.turn.Reason))
				think.show()
				continue
			}
			if e.turn.WillNotStart() {
				think.clear()
				fmt.Fprintf(a.stderr, "(no answer: %s; the message is kept)\n", termsafe.Text(e.turn.Reason))
			}
			delete(running, e.id)
			delete(waiting, e.id)
			if len(running) == 0 {
				think.clear()
			}
			if e.id == lastPost {
				lastEnded = true
				for _, m := range e.turn.Replies {
					need = max(need, m.ID)
				}
			}
			if finished() {
				startQuiet()
			}
		case <-quietC:
			return nil
		case <-deadlineC:
			if lastEnded {
				return nil
			}
			return fmt.Errorf("no reply from %s within %s", o.name, o.timeout)
		}
	}
}

// approvalAnswer reads line as `yes ID` or `no ID` about an approval in
// asked.
func approvalAnswer(line string, asked map[string]bool) (id string, allow, ok bool) {
	words := strings.Fields(strings.ToLower(line))
	if len(words) != 2 || !asked[words[1]] {
		return "", false, false
	}
	switch words[0] {
	case "yes", "y":
		return words[1], true, true
	case "no", "n":
		return words[1], false, true
	}
	return "", false, false
}

// latestID returns the id of the chat's newest message.
func latestID(ctx context.Context, o chatOpts) (int64, error) {
	var after int64
	for {
		msgs, err := o.client.Messages(ctx, o.chat, after, 0)
		if err != nil {
			return 0, err
		}
		if len(msgs) == 0 {
			return after, nil
		}
		after = msgs[len(msgs)-1].ID
	}
}

// stdinTerminal reports whether the chat reads a terminal.
func (a *app) stdinTerminal() bool {
	f, ok := a.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
