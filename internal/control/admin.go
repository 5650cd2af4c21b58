package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/snapshot"
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
const LocalPrefix = rules.LocalPrefix

// IsLocalChat reports whether chat is a local chat id.
func IsLocalChat(chat string) bool { return rules.IsLocalChat(chat) }

// Admin is the group, task and status logic shared by the control server
// (daemon running) and the command line (daemon stopped, database opened
// directly), so both behave the same. Wakers are the server's business:
// Admin only changes the store.
type Admin struct {
	DB            *store.DB
	AssistantName string         // the default trigger is "@" + AssistantName
	Timezone      *time.Location // for "cost today", schedules and message times
	Now           func() time.Time
	// CheckMounts checks extra mounts against the mount allowlist when they
	// are set (container.Allowlist.Validate); its error is shown as it is.
	// Nil refuses every extra mount.
	CheckMounts MountChecker
	// Snapshots tells and undoes what each turn changed in its group's
	// folder and memory; nil: `diff` and `undo` are refused.
	Snapshots *snapshot.Service
	// Idle runs an undo while no turn of the group runs
	// (agentrun.Runner.Idle: ErrTurnRunning while one does); nil (the
	// daemon is stopped): the undo runs as it is.
	Idle func(folder store.Folder, fn func() error) error
}

// MountChecker checks a group's extra mounts when they are set (it looks
// at the host's file system): isMain is whether the group is the main
// group.
type MountChecker func(ctx context.Context, mounts []store.MountRequest, isMain bool) error

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
	gs, err := a.DB.Groups.List(ctx)
	if err != nil {
		return nil, err
	}
	return a.groupsOut(ctx, gs)
}

// FindGroups lists the groups name names (MatchGroups): only those are
// looked up and answered, so a command that acts on one group costs the
// same however many are registered.
func (a *Admin) FindGroups(ctx context.Context, name string) ([]Group, error) {
	gs, err := a.DB.Groups.List(ctx)
	if err != nil {
		return nil, err
	}
	return a.groupsOut(ctx, MatchGroups(gs, name, func(g store.Group) (string, string, string, bool) {
		return string(g.Folder), string(g.Chat), g.Name, g.IsMain
	}))
}

// MatchGroups returns the groups of gs that name names, by the first rule
// that any matches: its folder, its chat id, its name exactly, its name
// ignoring case; an empty name names the main group. More than one is a
// name groups share. of says a group's folder, chat, name and whether it
// is the main group.
func MatchGroups[G any](gs []G, name string, of func(G) (folder, chat, gname string, main bool)) []G {
	by := []func(folder, chat, gname string, main bool) bool{
		func(folder, _, _ string, _ bool) bool { return folder == name },
		func(_, chat, _ string, _ bool) bool { return chat == name },
		func(_, _, gname string, _ bool) bool { return gname == name },
		func(_, _, gname string, _ bool) bool { return strings.EqualFold(gname, name) },
	}
	if name == "" {
		by = []func(folder, chat, gname string, main bool) bool{func(_, _, _ string, main bool) bool { return main }}
	}
	for _, match := range by {
		var found []G
		for _, g := range gs {
			if match(of(g)) {
				found = append(found, g)
			}
		}
		if len(found) > 0 {
			return found
		}
	}
	return nil
}

// groupsOut is gs as the API answers them, with today's cost.
func (a *Admin) groupsOut(ctx context.Context, gs []store.Group) ([]Group, error) {
	var err error
	start, end := rules.BudgetDay(a.now(), a.loc())
	out := make([]Group, 0, len(gs))
	for _, g := range gs {
		o := groupOut(g)
		if o.CostTodayUSD, err = a.DB.Usage.GroupCostSince(ctx, g.Folder, start); err != nil {
			return nil, err
		}
		if rules.OverBudget(o.BudgetDailyUSD, o.CostTodayUSD) {
			o.BudgetPaused, o.PausedUntil = true, &end
		}
		o.CostTodayUSD = rules.RoundUSD(o.CostTodayUSD)
		out = append(out, o)
	}
	return out, nil
}

// rulesErr marks a violation of the group and task rules as ErrInvalid.
func rulesErr(err error) error {
	if errors.Is(err, rules.ErrInvalid) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// AddGroup registers a chat as a group, by the rules of internal/rules:
// the folder defaults to a slug of the name, the trigger to
// "@<assistant name>" (an "@" is added when missing), requires-trigger to
// true.
func (a *Admin) AddGroup(ctx context.Context, req GroupAdd) (Group, error) {
	ng, err := rules.Group(rules.NewGroup{
		Chat: req.Chat, Name: req.Name, Folder: req.Folder, Trigger: req.Trigger,
		RequiresTrigger: req.RequiresTrigger, IsMain: req.IsMain, Tools: req.Tools,
	}, a.AssistantName)
	if err != nil {
		return Group{}, rulesErr(err)
	}
	g, err := a.DB.Groups.Add(ctx, ng)
	if err != nil {
		return Group{}, err
	}
	if IsLocalChat(string(g.Chat)) {
		if err := a.DB.Chats.Upsert(ctx, store.Chat{ID: g.Chat, Name: g.Name, Channel: local.Name}); err != nil {
			return Group{}, err
		}
	}
	return groupOut(g), nil
}

// RemoveGroup unregisters a group. Its folder, messages and tasks stay.
func (a *Admin) RemoveGroup(ctx context.Context, folder string) error {
	return a.DB.Groups.Remove(ctx, store.Folder(folder))
}

// UpdateGroup changes the fields of p that are set, by the rules of
// internal/rules. New extra mounts must pass CheckMounts (the mount
// allowlist) first; an empty list clears them.
func (a *Admin) UpdateGroup(ctx context.Context, folder string, p GroupPatch) (Group, error) {
	var out store.Group
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		g, err := tx.Groups.ByFolder(ctx, store.Folder(folder))
		if err != nil {
			return err
		}
		g, err = rules.ChangeGroup(g, rules.GroupChange{
			Name: p.Name, Trigger: p.Trigger, RequiresTrigger: p.RequiresTrigger,
			Model: p.Model, Timeout: p.Timeout, Mounts: p.ExtraMounts,
			BudgetDailyUSD: p.BudgetDailyUSD, Allow: p.Allow, Others: p.Others, Tools: p.Tools, Sees: p.Sees,
		}, a.AssistantName)
		if err != nil {
			return rulesErr(err)
		}
		if p.ExtraMounts != nil && len(g.ContainerConfig.ExtraMounts) > 0 {
			if a.CheckMounts == nil {
				return invalid("no mount allowlist is configured (BRIDGED_MOUNT_ALLOWLIST), so no extra mounts are allowed")
			}
			if err := a.CheckMounts(ctx, g.ContainerConfig.ExtraMounts, g.IsMain); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
		}
		out = g
		return tx.Groups.Update(ctx, g)
	})
	if err != nil {
		return Group{}, err
	}
	g := groupOut(out)
	// Admin changes the store only: a running daemon's server says what
	// became of a live container (SettingsApplier).
	g.Applies = AppliesNext
	return g, nil
}

// EndSession forgets a group's Claude session in the store, so that its
// next turn starts a new one; its folder and memory stay. It returns
// AppliesNext: a running daemon's server closes a live container
// (SessionEnder).
func (a *Admin) EndSession(ctx context.Context, folder string) (string, error) {
	f := store.Folder(folder)
	if _, err := a.DB.Groups.ByFolder(ctx, f); err != nil {
		return "", err
	}
	if err := a.DB.Sessions.Clear(ctx, f); err != nil {
		return "", err
	}
	return AppliesNext, nil
}

// Chats lists every chat seen, most recently active first, with the folder
// of the registered ones.
func (a *Admin) Chats(ctx context.Context) ([]Chat, error) {
	cs, err := a.DB.Chats.List(ctx)
	if err != nil {
		return nil, err
	}
	gs, err := a.DB.Groups.List(ctx)
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
	ts, err := a.DB.Tasks.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOut(t))
	}
	return out, nil
}

// PauseTask pauses a task (rules.Pause): a paused task stays paused; a
// running or done task cannot be paused.
func (a *Admin) PauseTask(ctx context.Context, id string) (Task, error) {
	var out store.Task
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		t, err := tx.Tasks.Get(ctx, store.TaskID(id))
		if err != nil {
			return err
		}
		out, err = rules.PauseTask(ctx, tx, t)
		return rulesErr(err)
	})
	if err != nil {
		return Task{}, err
	}
	return taskOut(out), nil
}

// ResumeTask makes a paused task active again (rules.Resume): a repeating
// task whose next run passed while it was paused gets its next slot from
// now, so it does not fire at once for a missed slot; a once task that is
// overdue runs now. A running or done task, one with no run left and one
// whose group is not registered cannot be resumed. The owner's resume
// vouches for the task: one whose prompt a group that is no longer full set
// becomes the owner's (rules.TaskMayRun).
func (a *Admin) ResumeTask(ctx context.Context, id string) (Task, error) {
	var out store.Task
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		t, err := tx.Tasks.Get(ctx, store.TaskID(id))
		if err != nil {
			return err
		}
		if t.PromptBy != "" && t.PromptBy != t.Folder {
			// A task the owner resumes is the owner's: one paused because
			// the group that set it is no longer full runs again.
			var setter *store.Group
			if g, err := tx.Groups.ByFolder(ctx, t.PromptBy); err == nil {
				setter = &g
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if rules.TaskMayRun(t, setter) != nil {
				t.PromptBy = ""
			}
		}
		out, err = rules.ResumeTask(ctx, tx, t, a.now(), a.loc())
		return rulesErr(err)
	})
	if err != nil {
		return Task{}, err
	}
	return taskOut(out), nil
}

// AddTask schedules a task of the owner's for a registered group, by the
// task rules (rules.FirstRun: a schedule that never runs or a once time in
// the past is refused). Its output goes to the group's chat.
func (a *Admin) AddTask(ctx context.Context, req TaskAdd) (Task, error) {
	var out store.Task
	err := a.DB.Tx(ctx, func(tx *store.Tx) error {
		g, err := tx.Groups.ByFolder(ctx, store.Folder(req.Folder))
		if err != nil {
			return err
		}
		sc, first, err := rules.FirstRun(schedule.Kind(req.Kind), req.Value, a.now(), a.loc())
		if err != nil {
			return rulesErr(err)
		}
		out, err = tx.Tasks.Create(ctx, store.Task{
			Folder:      g.Folder,
			Chat:        g.Chat,
			Prompt:      req.Prompt,
			Kind:        store.TaskKind(sc.Kind),
			Value:       sc.Value,
			ContextMode: store.ContextMode(req.ContextMode),
			NextRun:     &first,
		})
		return err
	})
	if err != nil {
		return Task{}, err
	}
	return taskOut(out), nil
}

// CancelTask deletes a task; its run log stays (store.Tx.DeleteTask).
func (a *Admin) CancelTask(ctx context.Context, id string) error {
	return a.DB.Tasks.Delete(ctx, store.TaskID(id))
}

// TaskRuns lists up to limit runs of a task, newest first (0: all); a
// cancelled task's runs are listed while the retention keeps them.
// ErrNotFound when there is no such task and no run of one.
func (a *Admin) TaskRuns(ctx context.Context, id string, limit int) ([]TaskRun, error) {
	_, err := a.DB.Tasks.Get(ctx, store.TaskID(id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	rs, lerr := a.DB.Tasks.Runs(ctx, store.TaskID(id), limit)
	if lerr != nil {
		return nil, lerr
	}
	if err != nil && len(rs) == 0 {
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
	cost, err := a.DB.Usage.CostSince(ctx, startOfDay(now, a.loc()))
	if err != nil {
		return Status{}, err
	}
	reported, err := a.DB.Usage.ReportedCostSince(ctx, startOfDay(now, a.loc()))
	if err != nil {
		return Status{}, err
	}
	size, err := a.DB.Size(ctx)
	if err != nil {
		return Status{}, err
	}
	out := Status{
		DatabaseBytes: size,
		Groups:        st.Groups,
		Tasks:         TaskCounts{Active: st.ActiveTasks, Paused: st.PausedTasks},
		Outbox:        OutboxCounts{Pending: st.PendingOutbox, Failed: st.FailedOutbox},
		MediaPending:  st.PendingMedia,
		CostToday:     rules.RoundUSD(cost),
		Timezone:      a.loc().String(),
	}
	out.ReportedCostToday = rules.RoundUSD(reported)
	// Only a group with a budget can be paused by it: the others' costs
	// are not looked up.
	groups, err := a.DB.Groups.List(ctx)
	if err != nil {
		return Status{}, err
	}
	start, _ := rules.BudgetDay(now, a.loc())
	for _, g := range groups {
		budget := g.ContainerConfig.BudgetDailyUSD
		if budget <= 0 {
			continue
		}
		cost, err := a.DB.Usage.GroupCostSince(ctx, g.Folder, start)
		if err != nil {
			return Status{}, err
		}
		if rules.OverBudget(budget, cost) {
			out.BudgetPaused = append(out.BudgetPaused, string(g.Folder))
		}
	}
	since := now.Add(-failureWindow)
	fails, err := a.DB.Outbox.RecentFailures(ctx, since, maxFailures)
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
	tasks, err := a.DB.Tasks.List(ctx, "")
	if err != nil {
		return Status{}, err
	}
	for _, t := range tasks {
		if t.LastRun == nil || t.LastRun.Before(since) {
			continue
		}
		runs, err := a.DB.Tasks.Runs(ctx, t.ID, 3)
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
	return a.DB.Messages.EverStored(ctx)
}

// maxMessages caps one Messages answer.
const maxMessages = 500

// Messages returns up to 500 messages of a registered local chat after the
// id after, both directions, times in the configured timezone.
func (a *Admin) Messages(ctx context.Context, chat string, after int64) ([]ChatMessage, error) {
	ms, err := a.DB.Messages.After(ctx, store.ChatID(chat), store.MessageID(after), maxMessages)
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
