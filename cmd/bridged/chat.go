package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bridged-app/bridged/internal/config"
	"github.com/bridged-app/bridged/internal/control"
)

// pollWait is how long one long-poll asks the daemon to wait.
const pollWait = 30 * time.Second

type chatOpts struct {
	client  *control.Client
	chat    string
	name    string // the group's display name
	sender  string
	timeout time.Duration
	quiet   time.Duration
}

func (a *app) cmdChat(ctx context.Context, args []string) error {
	fs := a.newFlagSet("chat", "chat [-m TEXT] [--timeout D] [flags] [GROUP]")
	msg := fs.String("m", "", "send this one message, print the reply or replies, and exit")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up waiting for a reply after this long")
	quiet := fs.Duration("quiet", 2*time.Second, "after a reply, wait this long for more before exiting")
	sender := fs.String("sender", "", "your name in the chat (default $USER)")
	cf := config.Register(fs)
	pos, err := parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if *msg != "" && len(pos) == 0 {
		fmt.Fprintln(a.stderr, "bridged chat: -m needs a GROUP: bridged chat -m TEXT GROUP")
		return errUsage
	}
	if *timeout <= 0 || *quiet <= 0 {
		fmt.Fprintln(a.stderr, "bridged chat: --timeout and --quiet must be positive")
		return errUsage
	}
	cfg, err := cf.Resolve(a.getenv)
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
	o := chatOpts{client: c, chat: g.Chat, name: g.Name, sender: *sender, timeout: *timeout, quiet: *quiet}
	if o.sender == "" {
		if o.sender = a.getenv("USER"); o.sender == "" {
			o.sender = "you"
		}
	}
	if *msg != "" {
		return a.chatOnce(ctx, o, *msg)
	}
	return a.chatInteractive(ctx, o, cfg.AssistantName)
}

// findGroup returns the group with folder pos[0], or the main group.
func findGroup(ctx context.Context, c *control.Client, pos []string) (control.Group, error) {
	gs, err := c.Groups(ctx)
	if err != nil {
		return control.Group{}, err
	}
	for _, g := range gs {
		if (len(pos) == 1 && g.Folder == pos[0]) || (len(pos) == 0 && g.IsMain) {
			return g, nil
		}
	}
	if len(pos) == 0 {
		return control.Group{}, errors.New("no main group is registered: name a GROUP, or add one with `bridged groups add --name main --main local:main`")
	}
	return control.Group{}, fmt.Errorf("no group with folder %q (see `bridged groups list`)", pos[0])
}

// chatOnce posts text and prints every outbound message after it, until a
// reply came and o.quiet passed without another, or o.timeout passed.
func (a *app) chatOnce(ctx context.Context, o chatOpts, text string) error {
	after, err := o.client.PostMessage(ctx, o.chat, o.sender, text)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(o.timeout)
	replied := false
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			if replied {
				return nil
			}
			return fmt.Errorf("no reply from %s within %s", o.name, o.timeout)
		}
		wait := min(pollWait, remaining)
		if replied {
			wait = min(o.quiet, remaining)
		}
		msgs, err := o.client.Messages(ctx, o.chat, after, wait)
		if err != nil {
			return err
		}
		if len(msgs) == 0 && replied {
			return nil
		}
		for _, m := range msgs {
			after = m.ID
			if m.Direction == control.Out {
				fmt.Fprintln(a.stdout, m.Text)
				replied = true
			}
		}
	}
}

type pollResult struct {
	msgs []control.ChatMessage
	err  error
}

// chatInteractive reads lines from stdin and posts each one, printing
// messages as they arrive. At the end of input it waits for the replies to
// the last message like chatOnce.
func (a *app) chatInteractive(ctx context.Context, o chatOpts, assistant string) error {
	after, err := latestID(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "Talking to %s (%s) as %s. Type a message and press Enter; Ctrl-D ends.\n", o.name, o.chat, o.sender)

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

	posted := make(map[int64]bool)
	var lastPost int64
	replied := false
	var quietC, deadlineC <-chan time.Time
	var quietT *time.Timer
	eof := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				lines = nil
				eof = true
				if lastPost == 0 {
					return nil
				}
				deadline := time.NewTimer(o.timeout)
				defer deadline.Stop()
				deadlineC = deadline.C
				if replied {
					quietT = time.NewTimer(o.quiet)
					defer quietT.Stop()
					quietC = quietT.C
				}
				continue
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			id, err := o.client.PostMessage(ctx, o.chat, o.sender, line)
			if err != nil {
				return err
			}
			posted[id] = true
			lastPost, replied = id, false
		case r := <-polls:
			if r.err != nil {
				return r.err
			}
			for _, m := range r.msgs {
				switch {
				case m.Direction == control.Out:
					name := m.Sender
					if name == "" {
						name = assistant
					}
					fmt.Fprintf(a.stdout, "%s: %s\n", name, m.Text)
					if m.ID > lastPost {
						replied = true
					}
				case !posted[m.ID]:
					fmt.Fprintf(a.stdout, "%s: %s\n", m.Sender, m.Text)
				}
			}
			if eof && replied {
				if quietT == nil {
					quietT = time.NewTimer(o.quiet)
					defer quietT.Stop()
				} else {
					quietT.Reset(o.quiet)
				}
				quietC = quietT.C
			}
		case <-quietC:
			return nil
		case <-deadlineC:
			if replied {
				return nil
			}
			return fmt.Errorf("no reply from %s within %s", o.name, o.timeout)
		}
	}
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
