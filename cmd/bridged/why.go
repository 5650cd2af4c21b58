package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/control"
	"github.com/bridged-app/bridged/internal/termsafe"
)

// storyTeller is what `bridged why` needs: the daemon's control client, or
// the store when it is stopped.
type storyTeller interface {
	Story(ctx context.Context, ref, chat string) (control.Story, error)
}

var (
	_ storyTeller = (*control.Client)(nil)
	_ storyTeller = (*control.Admin)(nil)
)

func (a *app) cmdWhy(ctx context.Context, args []string) error {
	fs := a.newFlagSet("why", "why [MSG|last] [--chat CHAT] [--json] [flags]")
	chat := fs.String("chat", "", "the chat (a chat id such as local:family, or a group's folder) whose last message to tell")
	asJSON := fs.Bool("json", false, "print the story as JSON")
	pos, cfg, err := a.parseClientConfig(fs, args, 0, 1)
	if err != nil {
		return err
	}
	ref := "last"
	if len(pos) == 1 {
		ref = pos[0]
	}
	b, _, closeFn, err := a.openBackend(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeFn()
	t, ok := b.(storyTeller)
	if !ok {
		return errors.New("bridged why: this backend cannot tell a message's story")
	}
	st, err := t.Story(ctx, ref, *chat)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, st)
	}
	printStory(a.stdout, st, cfg.Timezone)
	return nil
}

// printStory writes st for a person: one line per step, with its time and
// the time since the message arrived.
func printStory(w io.Writer, st control.Story, loc *time.Location) {
	m := st.Message
	group := st.Group
	if group == "" {
		group = "no group"
	}
	fmt.Fprintf(w, "message %d in %s (%s): %s\n", m.ID, termsafe.Line(m.Chat), termsafe.Line(group), oneLine(m.Text, 70))
	verdict := "did not wake the agent"
	if st.Woke {
		verdict = "woke the agent"
	}
	fmt.Fprintf(w, "%s: %s\n\n", verdict, termsafe.Text(st.Why))
	for _, s := range st.Steps {
		at, since := "not recorded", ""
		if s.At != nil {
			at = s.At.In(loc).Format("2006-01-02 15:04:05.000")
			if s.SinceMS != 0 {
				since = fmt.Sprintf("%+.3fs", float64(s.SinceMS)/1000)
			}
		}
		step := s.Step
		if s.State != "" {
			step += " " + strings.ReplaceAll(s.State, "_", " ")
		}
		fmt.Fprintf(w, "%-23s %9s  %-16s %s\n", at, since, termsafe.Line(step), termsafe.Line(s.Detail))
	}
}
