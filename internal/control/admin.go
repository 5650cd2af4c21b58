package control

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// Error classes, checked with errors.Is. The Client's errors match them too.
var (
	// ErrNotFound: no such group, task or chat.
	ErrNotFound = store.ErrNotFound
	// ErrConflict: the folder or chat is taken, or a main group exists.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed or a value is not allowed.
	ErrInvalid = errors.New("invalid request")
	// ErrNotRunning: no daemon answers on the control socket.
	ErrNotRunning = errors.New("bridged is not running")
	// ErrAlreadyRunning: another daemon answers on the control socket.
	ErrAlreadyRunning = errors.New("another bridged is already running")
)

// LocalPrefix starts every local chat id ("local:<name>").
const LocalPrefix = local.Prefix

// IsLocalChat reports whether chat is a local chat id.
func IsLocalChat(chat string) bool { return local.IsLocal(chat) }

// Admin is the group, task and status logic shared by the control server
// (daemon running) and the command line (daemon stopped, database opened
// directly), so both behave the same. Wakers are the server's business:
// Admin only changes the store.
type Admin struct {
	DB            *store.DB
	AssistantName string         // the default trigger is "@" + AssistantName
	Timezone      *time.Location // for "cost today", schedules and message times
	Now           func() time.Time
}

func (a *Admin) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Admin) loc() *time.Location {
	if a.Timezone != nil {
		return a.Timezone
	}
	return time.Local
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Groups lists the registered groups, oldest first.
func (a *Admin) Groups(ctx context.Context) ([]Group, error) {
	gs, err := a.DB.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Group, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupOut(g))
	}
	return out, nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// Slug turns a display name into a folder name: lowercase letters and digits
// with dashes between words, at most store.MaxFolderLen characters.
func Slug(name string) string {
	s := nonSlug.ReplaceAllString(strings.ToLower(name), "-")
	s = strings.Trim(s, "-")
	if len(s) > store.MaxFolderLen {
		s = strings.TrimRight(s[:store.MaxFolderLen], "-")
	}
	return s
}

// checkChat accepts local chats and WhatsApp-looking ids.
func checkChat(chat string) error {
	switch {
	case chat == "":
		return invalid("a chat id is required (local:<name>, or a WhatsApp id from `bridged groups list --available`)")
	case strings.ContainsAny(chat, " \t\r\n/\\"):
		return invalid("chat id %q must not contain spaces or slashes", chat)
	case strings.HasPrefix(chat, LocalPrefix):
		if !IsLocalChat(chat) {
			return invalid("chat id %q: want local:<name>", chat)
		}
	case !strings.Contains(chat, "@"):
		return invalid("chat id %q: want local:<name> or a WhatsApp id such as 120363…@g.us", chat)
	}
	return nil
}

func (a *Admin) normTrigger(t string) (string, error) {
	t = strings.TrimSpace(t)
	if t == "" {
		return "@" + a.AssistantName, nil
	}
	if !strings.HasPrefix(t, "@") {
		t = "@" + t
	}
	if len(t) < 2 || strings.ContainsAny(t, " \t\r\n") {
		return "", invalid("trigger %q: want one word such as @%s", t, a.AssistantName)
	}
	return t, nil
}

// AddGroup registers a chat as a group. The folder defaults to a slug of the
// name, the trigger to "@<assistant name>", requires-trigger to true.
func (a *Admin) AddGroup(ctx context.Context, req GroupAdd) (Group, error) {
	req.Chat = strings.TrimSpace(req.Chat)
	req.Name = strings.TrimSpace(req.Name)
	if err := checkChat(req.Chat); err != nil {
		return Group{}, err
	}
	if req.Name == "" {
		return Group{}, invalid("a name is required")
	}
	folder := strings.TrimSpace(req.Folder)
	if folder == "" {
		if folder = Slug(req.Name); folder == "" {
			return Group{}, invalid("name %q gives no folder name: choose one with --folder", req.Name)
		}
	}
	if err := store.ValidateFolder(folder); err != nil {
		return Group{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	trigger, err := a.normTrigger(req.Trigger)
	if err != nil {
		return Group{}, err
	}
	requires := true
	if req.RequiresTrigger != nil {
		requires = *req.RequiresTrigger
	}
	g, err := a.DB.AddGroup(ctx, store.Group{
		Chat:            store.ChatID(req.Chat),
		Name:            req.Name,
		Folder:          store.Folder(folder),
		Trigger:         trigger,
		RequiresTrigger: requires,
		IsMain:          req.IsMain,
	})
	if err != nil {
		return Group{}, err
	}
	if IsLocalChat(req.Chat) {
		if err := a.DB.UpsertChat(ctx, store.Chat{ID: g.Chat, Name: g.Name, Channel: local.Name}); err != nil {
			return Group{}, err
		}
	}
	return groupOut(g), nil
}

// RemoveGroup unregisters a group. Its folder, messages and tasks stay.
func (a *Admin) RemoveGroup(ctx context.Context, folder string) error {
	return a.DB.RemoveGroup(ctx, store.Folder(folder))
}

// UpdateGroup changes the fields of p that are set.
func (a *Admin) UpdateGroup(ctx context.Context, folder string, p GroupPatch) (Group, error) {
	var out store.Group
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		g, err := tx.GetGroupByFolder(ctx, store.Folder(folder))
		if err != nil {
			return err
		}
		if p.Name != nil {
			if g.Name = strings.TrimSpace(*p.Name); g.Name == "" {
				return invalid("the name must not be empty")
			}
		}
		if p.Trigger != nil {
			if strings.TrimSpace(*p.Trigger) == "" {
				return invalid("the trigger must not be empty")
			}
			if g.Trigger, err = a.normTrigger(*p.Trigger); err != nil {
				return err
			}
		}
		if p.RequiresTrigger != nil {
			g.RequiresTrigger = *p.RequiresTrigger
		}
		if p.Model != nil {
			m := strings.TrimSpace(*p.Model)
			if strings.ContainsAny(m, " \t\r\n") {
				return invalid("model %q must be one word", m)
			}
			g.ContainerConfig.Model = m
		}
		if p.Timeout != nil {
			switch v := strings.TrimSpace(*p.Timeout); v {
			case "", "0":
				g.ContainerConfig.Timeout = 0
			default:
				d, err := time.ParseDuration(v)
				if err != nil || d < time.Minute {
					return invalid("timeout %q: want a Go duration of at least 1m, such as 45m (0 for the default)", v)
				}
				g.ContainerConfig.Timeout = d
			}
		}
		out = g
		return tx.UpdateGroup(ctx, g)
	})
	if err != nil {
		return Group{}, err
	}
	return groupOut(out), nil
}

// Chats lists every chat seen, most recently active first, with the folder
// of the registered ones.
func (a *Admin) Chats(ctx context.Context) ([]Chat, error) {
	cs, err := a.DB.ListChats(ctx)
	if err != nil {
		return nil, err
	}
	gs, err := a.DB.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	folders := make(map[store.ChatID]string, len(gs))
	for _, g := range gs {
		folders[g.Chat] = string(g.Folder)
	}
	out := make([]Chat, 0, len(cs))
	for _, c := range cs {
		out = append(out, Chat{
			ID: string(c.ID), Name: c.Name, Channel: c.Channel, IsGroup: c.IsGroup,
			LastActivity: c.LastActivity, Folder: folders[c.ID],
		})
	}
	return out, nil
}

// Tasks lists every task, oldest first.
func (a *Admin) Tasks(ctx context.Context) ([]Task, error) {
	ts, err := a.DB.ListTasks(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOut(t))
	}
	return out, nil
}

// PauseTask pauses a task. A finished task cannot be paused.
func (a *Admin) PauseTask(ctx context.Context, id string) (Task, error) {
	var out store.Task
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		t, err := tx.GetTask(ctx, store.TaskID(id))
		if err != nil {
			return err
		}
		switch t.Status {
		case store.TaskDone:
			return invalid("task %s is done", id)
		case store.TaskRunning:
			return invalid("task %s is running its last run", id)
		case store.TaskPaused:
			out = t
			return nil
		}
		t.Status = store.TaskPaused
		out = t
		return tx.PauseTask(ctx, t.ID, "")
	})
	if err != nil {
		return Task{}, err
	}
	return taskOut(out), nil
}

// ResumeTask makes a paused task active again. A repeating task whose next
// run passed while it was paused gets its next slot from now, so it does not
// fire at once for a missed slot; a once task that is overdue runs now.
func (a *Admin) ResumeTask(ctx context.Context, id string) (Task, error) {
	var out store.Task
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		t, err := tx.GetTask(ctx, store.TaskID(id))
		if err != nil {
			return err
		}
		switch t.Status {
		case store.TaskActive, store.TaskRunning:
			out = t
			return nil
		case store.TaskDone:
			return invalid("task %s is done", id)
		}
		if _, err := tx.GetGroupByFolder(ctx, t.Folder); errors.Is(err, store.ErrNotFound) {
			return invalid("task %s belongs to group %s, which is not registered", id, t.Folder)
		} else if err != nil {
			return err
		}
		now := a.now()
		if t.Kind != schedule.Once {
			s, err := schedule.Parse(t.Kind, t.Value, a.loc())
			if err != nil {
				return fmt.Errorf("%w: task %s: %w", ErrInvalid, id, err)
			}
			switch {
			case t.NextRun == nil:
				first := s.First(now, a.loc())
				t.NextRun = &first
			case t.NextRun.Before(now):
				next := s.Next(*t.NextRun, now, a.loc())
				t.NextRun = &next
			}
		}
		t.Status = store.TaskActive
		out = t
		return tx.UpdateTask(ctx, t)
	})
	if err != nil {
		return Task{}, err
	}
	return taskOut(out), nil
}

// CancelTask deletes a task and its run log.
func (a *Admin) CancelTask(ctx context.Context, id string) error {
	return a.DB.DeleteTask(ctx, store.TaskID(id))
}

// TaskRuns lists up to limit runs of a task, newest first (0: all).
func (a *Admin) TaskRuns(ctx context.Context, id string, limit int) ([]TaskRun, error) {
	if _, err := a.DB.GetTask(ctx, store.TaskID(id)); err != nil {
		return nil, err
	}
	rs, err := a.DB.ListTaskRuns(ctx, store.TaskID(id), limit)
	if err != nil {
		return nil, err
	}
	out := make([]TaskRun, 0, len(rs))
	for _, r := range rs {
		out = append(out, runOut(r))
	}
	return out, nil
}

// failureWindow is how far back Status looks for failures.
const failureWindow = 24 * time.Hour

// maxFailures caps the failures Status lists.
const maxFailures = 10

// startOfDay is midnight of now's day in loc.
func startOfDay(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// Status reports what the store knows: counts, recent failures (outbox rows
// and task runs of the last 24 hours), and today's cost in the configured
// timezone. Running is false; the server fills in the live part.
func (a *Admin) Status(ctx context.Context) (Status, error) {
	now := a.now()
	st, err := a.DB.Stats(ctx)
	if err != nil {
		return Status{}, err
	}
	cost, err := a.DB.CostSince(ctx, startOfDay(now, a.loc()))
	if err != nil {
		return Status{}, err
	}
	out := Status{
		Groups:    st.Groups,
		Tasks:     TaskCounts{Active: st.ActiveTasks, Paused: st.PausedTasks},
		Outbox:    OutboxCounts{Pending: st.PendingOutbox, Failed: st.FailedOutbox},
		CostToday: cost,
		Timezone:  a.loc().String(),
	}
	since := now.Add(-failureWindow)
	fails, err := a.DB.RecentFailures(ctx, since, maxFailures)
	if err != nil {
		return Status{}, err
	}
	for _, f := range fails {
		at := f.CreatedAt
		if f.FailedAt != nil {
			at = *f.FailedAt
		}
		out.Failures = append(out.Failures, Failure{Time: at, Kind: "outbox", Where: string(f.Chat), Error: f.LastError})
	}
	tasks, err := a.DB.ListTasks(ctx, "")
	if err != nil {
		return Status{}, err
	}
	for _, t := range tasks {
		if t.LastRun == nil || t.LastRun.Before(since) {
			continue
		}
		runs, err := a.DB.ListTaskRuns(ctx, t.ID, 3)
		if err != nil {
			return Status{}, err
		}
		for _, r := range runs {
			if r.Status == store.RunError && !r.StartedAt.Before(since) {
				out.Failures = append(out.Failures, Failure{Time: r.StartedAt, Kind: "task", Where: string(t.ID), Error: r.Error})
			}
		}
	}
	out.Failures = sortFailures(out.Failures)
	return out, nil
}

// sortFailures orders newest first and keeps maxFailures.
func sortFailures(fs []Failure) []Failure {
	slices.SortStableFunc(fs, func(a, b Failure) int { return b.Time.Compare(a.Time) })
	if len(fs) > maxFailures {
		fs = fs[:maxFailures]
	}
	return fs
}

// MessagesStored returns how many messages were ever stored: the highest
// message id, since ids are never reused.
func (a *Admin) MessagesStored(ctx context.Context) (int64, error) {
	chats, err := a.DB.ListChats(ctx)
	if err != nil {
		return 0, err
	}
	var top store.MessageID
	for _, c := range chats {
		id, err := a.DB.LatestMessageID(ctx, c.ID)
		if err != nil {
			return 0, err
		}
		top = max(top, id)
	}
	return int64(top), nil
}

// maxMessages caps one Messages answer.
const maxMessages = 500

// Messages returns up to 500 messages of a registered local chat after the
// id after, both directions, times in the configured timezone.
func (a *Admin) Messages(ctx context.Context, chat string, after int64) ([]ChatMessage, error) {
	ms, err := a.DB.MessagesAfter(ctx, store.ChatID(chat), store.MessageID(after), maxMessages)
	if err != nil {
		return nil, err
	}
	out := make([]ChatMessage, 0, len(ms))
	for _, m := range ms {
		cm := ChatMessage{ID: int64(m.ID), Direction: In, Sender: m.SenderName, Text: m.Text, Time: m.SentAt.In(a.loc())}
		if cm.Sender == "" {
			cm.Sender = m.Sender
		}
		if m.IsBot {
			cm.Direction = Out
			if cm.Sender == "" {
				cm.Sender = a.AssistantName
			}
		}
		out = append(out, cm)
	}
	return out, nil
}
