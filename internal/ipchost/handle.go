package ipchost

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// Error classes of a failed request; the response carries the message.
var (
	// ErrRefused: the group may not do this (DESIGN §8).
	ErrRefused = errors.New("refused")
	// ErrBadRequest: the arguments are wrong (a bad schedule, an unknown
	// group or chat, a task that does not exist or is in the wrong state).
	ErrBadRequest = errors.New("bad request")
)

// refreshTimeout bounds a list_groups refresh.
const refreshTimeout = 15 * time.Second

// failure is an error whose text is what the agent should read.
type failure struct {
	class error
	msg   string
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.class }

func refused(format string, args ...any) error {
	return &failure{ErrRefused, "refused: " + fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &failure{ErrBadRequest, fmt.Sprintf(format, args...)}
}

// Handle authorises and carries out one request from the group with folder
// (its identity is the directory the request came from) and returns its
// response, without recording it as handled (requests read from their files
// are recorded; see unit). It never panics; a refused or failed request
// changes nothing.
func (h *Host) Handle(ctx context.Context, folder string, req ipc.Request) ipc.Response {
	return h.carryOut(ctx, &unit{folder: store.Folder(folder), req: req})
}

// carryOut carries out u's request with u as its unit of work and returns
// its response. It never panics.
func (h *Host) carryOut(ctx context.Context, u *unit) (resp ipc.Response) {
	req := u.req
	defer func() {
		if r := recover(); r != nil {
			h.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).
				Str("group", string(u.folder)).Str("request", req.ID).Msg("ipc request panicked")
			resp = ipc.ErrorResponse(req.ID, errors.New("internal error while handling the request"))
		}
	}()
	data, err := h.handle(ctx, u)
	if err != nil {
		var f *failure
		if !errors.As(err, &f) {
			err = fmt.Errorf("internal error: %w", err)
		}
		return ipc.ErrorResponse(req.ID, err)
	}
	resp, err = ipc.OKResponse(req.ID, data)
	if err != nil {
		return ipc.ErrorResponse(req.ID, fmt.Errorf("internal error: %w", err))
	}
	return resp
}

// isAction reports whether a request of type typ is an agent action that
// commits with the turn in flight, held through the Messenger: every change
// but send_message, which the Messenger commits itself.
func isAction(typ ipc.RequestType) bool {
	switch typ {
	case ipc.TypeScheduleTask, ipc.TypeUpdateTask, ipc.TypePauseTask, ipc.TypeResumeTask, ipc.TypeCancelTask, ipc.TypeRegisterGroup:
		return true
	}
	return false
}

func (h *Host) handle(ctx context.Context, u *unit) (data any, err error) {
	folder, req := u.folder, u.req
	if isAction(req.Type) {
		// The turn is held from before the action is looked at until its
		// transaction is over, so the cursor committed with it is the one
		// of the turn in flight.
		u.turn = h.msg.HoldTurn(ctx, string(folder))
		defer func() { u.turn.Release(ctx, err == nil) }()
	}
	if !ipc.ValidID(req.ID) {
		return nil, badRequest("request id %q is not a valid id", req.ID)
	}
	g, err := h.db.Groups.ByFolder(ctx, folder)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refused("group %s is not registered", folder)
	}
	if err != nil {
		return nil, err
	}
	if req.Args == nil {
		return nil, badRequest("%s request has no arguments", req.Type)
	}
	if err := req.Args.Validate(); err != nil {
		return nil, badRequest("%s", strings.TrimPrefix(err.Error(), ipc.ErrInvalid.Error()+": "))
	}
	mismatch := badRequest("%s request carries the wrong arguments", req.Type)
	switch req.Type {
	case ipc.TypeSendMessage:
		a, ok := req.Args.(ipc.SendMessageArgs)
		if !ok {
			return nil, mismatch
		}
		return h.sendMessage(ctx, u, g, a)
	case ipc.TypeScheduleTask:
		a, ok := req.Args.(ipc.ScheduleTaskArgs)
		if !ok {
			return nil, mismatch
		}
		return h.scheduleTask(ctx, u, g, a)
	case ipc.TypeListTasks:
		return h.listTasks(ctx, g)
	case ipc.TypeUpdateTask:
		a, ok := req.Args.(ipc.UpdateTaskArgs)
		if !ok {
			return nil, mismatch
		}
		return h.updateTask(ctx, u, g, a)
	case ipc.TypePauseTask, ipc.TypeResumeTask, ipc.TypeCancelTask:
		a, ok := req.Args.(ipc.TaskIDArgs)
		if !ok {
			return nil, mismatch
		}
		return h.taskAction(ctx, u, g, store.TaskID(strings.TrimSpace(a.TaskID)))
	case ipc.TypeRegisterGroup:
		a, ok := req.Args.(ipc.RegisterGroupArgs)
		if !ok {
			return nil, mismatch
		}
		return h.registerGroup(ctx, u, g, a)
	case ipc.TypeListGroups:
		a, ok := req.Args.(ipc.ListGroupsArgs)
		if !ok {
			return nil, mismatch
		}
		return h.listGroups(ctx, g, a)
	}
	return nil, badRequest("unknown request type %q", req.Type)
}

// ---- send_message ----

func (h *Host) sendMessage(ctx context.Context, u *unit, g store.Group, a ipc.SendMessageArgs) (any, error) {
	chat := g.Chat
	if target := store.ChatID(strings.TrimSpace(a.TargetChat)); target != "" && target != g.Chat {
		if !g.IsMain {
			return nil, refused("only the main group can send to another chat")
		}
		known, err := h.knownChat(ctx, target)
		if err != nil {
			return nil, err
		}
		if !known {
			return nil, badRequest("unknown chat %q: use a chat id from list_groups", target)
		}
		chat = target
	}
	var file *ipc.FileInfo
	committed := false
	if strings.TrimSpace(a.File) != "" {
		// Below the free-space floor nothing is staged: the agent is told
		// why (and tells the chat); the owner's low-disk alert says the rest.
		if err := h.cfg.Floor.Check(); err != nil {
			return nil, refused("file %q not sent: the disk of the bridged host is almost full (%s); "+
				"no file is sent until the owner frees space", a.File, strings.TrimPrefix(err.Error(), home.ErrLowDisk.Error()+": "))
		}
		// The copy is taken before the row commits and kept under the
		// row's key in the transaction that commits it.
		staged, err := h.stageFile(ctx, g.Folder, a.File)
		if err != nil {
			return nil, err
		}
		defer func() {
			if !committed {
				staged.Discard()
			}
		}()
		sf := staged.File()
		u.file = &outFile{h: h, folder: g.Folder, arg: a.File, staged: staged, info: ipc.FileInfo{Name: sf.Name, Kind: sf.Kind, Size: sf.Size}}
		file = &u.file.info
	}
	// The message, its request's record and its file commit in the
	// Messenger's transaction, which applies u after the row's insert.
	item, err := h.msg.SendMessage(ctx, u, string(chat), a.Text, store.OriginTool, string(g.Folder))
	if f := (*failure)(nil); errors.As(err, &f) {
		return nil, f
	}
	if err != nil {
		return nil, &failure{ErrBadRequest, fmt.Sprintf("message not sent: %v", err)}
	}
	committed = true
	if item.Chat != "" {
		chat = item.Chat
	}
	if file != nil {
		h.log.Info().Str("group", string(g.Folder)).Int64("outbox", int64(item.ID)).Str("kind", file.Kind).
			Int64("bytes", file.Size).Msg("file queued")
	}
	return ipc.SendResult{OutboxID: int64(item.ID), Chat: string(chat), File: file}, nil
}

// knownChat reports whether chat is a registered group's or a chat a
// channel has seen.
func (h *Host) knownChat(ctx context.Context, chat store.ChatID) (bool, error) {
	if _, err := h.db.Groups.ByChat(ctx, chat); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if _, err := h.db.Chats.Get(ctx, chat); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return false, nil
}

// ---- tasks ----

// parseSchedule checks a schedule and returns it with its first run from now
// (rules.FirstRun).
func (h *Host) parseSchedule(kind schedule.Kind, value string) (schedule.Schedule, time.Time, error) {
	sc, first, err := rules.FirstRun(kind, value, h.now(), h.cfg.Timezone)
	if err != nil {
		return sc, first, ruleFailure(err)
	}
	return sc, first, nil
}

// ruleFailure turns a violation of the group and task rules into a bad
// request whose text is the rule's; other errors stay internal.
func ruleFailure(err error) error {
	if errors.Is(err, rules.ErrInvalid) {
		return &failure{ErrBadRequest, err.Error()}
	}
	return err
}

func (h *Host) scheduleTask(ctx context.Context, u *unit, g store.Group, a ipc.ScheduleTaskArgs) (any, error) {
	target := g
	if tf := store.Folder(strings.TrimSpace(a.TargetGroup)); tf != "" && tf != g.Folder {
		if !g.IsMain {
			return nil, refused("only the main group can schedule tasks for another group")
		}
		tg, err := h.db.Groups.ByFolder(ctx, tf)
		if errors.Is(err, store.ErrNotFound) {
			return nil, badRequest("group %q is not registered", tf)
		}
		if err != nil {
			return nil, err
		}
		target = tg
	}
	if err := rules.MayDirect(g, target.Folder, "schedule a task"); err != nil {
		return nil, refused("%v", err)
	}
	if err := checkPrompt(a.Prompt, h.cfg.MaxTaskPrompt, "scheduled"); err != nil {
		return nil, err
	}
	sc, first, err := h.parseSchedule(a.ScheduleType, a.ScheduleValue)
	if err != nil {
		return nil, err
	}
	var task store.Task
	err = h.db.Tx(ctx, func(tx *store.Tx) error {
		// Counted and created in one transaction: writers are serialised, so
		// no two requests both take the last place.
		n, err := tx.Tasks.CountLive(ctx, target.Folder)
		if err != nil {
			return err
		}
		if n >= h.cfg.MaxTasks {
			return refused("group %s already has %d scheduled tasks, the most a group may have (BRIDGED_MAX_TASKS=%d); "+
				"nothing was scheduled. Cancel a task it no longer needs with cancel_task (list_tasks shows them), then schedule again",
				target.Folder, n, h.cfg.MaxTasks)
		}
		task, err = tx.Tasks.Create(ctx, store.Task{
			Folder:      target.Folder,
			Chat:        target.Chat,
			Prompt:      a.Prompt,
			Kind:        store.TaskKind(sc.Kind),
			Value:       sc.Value,
			ContextMode: store.ContextMode(a.ContextMode),
			NextRun:     &first,
			PromptBy:    g.Folder,
		})
		if err != nil {
			return err
		}
		return u.commit(ctx, tx, taskInfo(task, h.cfg.Timezone))
	})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, &failure{ErrBadRequest, err.Error()}
		}
		return nil, err
	}
	h.wake()
	h.log.Info().Str("group", string(g.Folder)).Str("task", string(task.ID)).Str("task_group", string(task.Folder)).
		Str("kind", string(task.Kind)).Time("next_run", first.In(h.cfg.Timezone)).Msg("task scheduled")
	return taskInfo(task, h.cfg.Timezone), nil
}

// checkPrompt refuses a task prompt over limit bytes (the configured
// size); undone says what did not happen ("scheduled", "changed").
func checkPrompt(prompt string, limit int, undone string) error {
	if len(prompt) > limit {
		return badRequest("the task prompt is %d bytes, over the %d-byte limit for a task's prompt (BRIDGED_MAX_TASK_PROMPT); "+
			"nothing was %s. Shorten it: keep long material in a file in your workspace and have the prompt say to read it",
			len(prompt), limit, undone)
	}
	return nil
}

func (h *Host) listTasks(ctx context.Context, g store.Group) (any, error) {
	folder := g.Folder
	if g.IsMain {
		folder = ""
	}
	tasks, err := h.db.Tasks.List(ctx, folder)
	if err != nil {
		return nil, err
	}
	out := make([]ipc.TaskInfo, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, taskInfo(t, h.cfg.Timezone))
	}
	return out, nil
}

// ownedTask returns the task id if g may manage it. Another group's task is
// "not found" for a non-main group, exactly like a missing one.
func ownedTask(ctx context.Context, tx *store.Tx, g store.Group, id store.TaskID) (store.Task, error) {
	notFound := badRequest("task %q not found", id)
	if id == "" {
		return store.Task{}, notFound
	}
	t, err := tx.Tasks.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Task{}, notFound
	}
	if err != nil {
		return store.Task{}, err
	}
	if !g.IsMain && t.Folder != g.Folder {
		return store.Task{}, notFound
	}
	return t, nil
}

func (h *Host) updateTask(ctx context.Context, u *unit, g store.Group, a ipc.UpdateTaskArgs) (any, error) {
	if a.Prompt != nil {
		if err := checkPrompt(*a.Prompt, h.cfg.MaxTaskPrompt, "changed"); err != nil {
			return nil, err
		}
	}
	var updated store.Task
	err := h.db.Tx(ctx, func(tx *store.Tx) error {
		t, err := ownedTask(ctx, tx, g, store.TaskID(strings.TrimSpace(a.TaskID)))
		if err != nil {
			return err
		}
		if err := rules.MayDirect(g, t.Folder, "change a task"); err != nil {
			return refused("%v", err)
		}
		if a.Prompt != nil {
			t.PromptBy = g.Folder
		}
		updated, err = rules.UpdateTask(ctx, tx, t, rules.TaskChange{Prompt: a.Prompt, Kind: a.ScheduleType, Value: a.ScheduleValue},
			h.now(), h.cfg.Timezone)
		if err != nil {
			return ruleFailure(err)
		}
		return u.commit(ctx, tx, taskInfo(updated, h.cfg.Timezone))
	})
	if err != nil {
		return nil, err
	}
	h.wake()
	h.log.Info().Str("group", string(g.Folder)).Str("task", string(updated.ID)).Msg("task updated")
	return taskInfo(updated, h.cfg.Timezone), nil
}

func (h *Host) taskAction(ctx context.Context, u *unit, g store.Group, id store.TaskID) (any, error) {
	kind := u.req.Type
	var result store.Task
	err := h.db.Tx(ctx, func(tx *store.Tx) error {
		t, err := ownedTask(ctx, tx, g, id)
		if err != nil {
			return err
		}
		result = t
		if kind == ipc.TypeResumeTask {
			if err := rules.MayDirect(g, t.Folder, "resume a task"); err != nil {
				return refused("%v", err)
			}
		}
		switch kind {
		case ipc.TypePauseTask:
			result, err = rules.PauseTask(ctx, tx, t)
		case ipc.TypeResumeTask:
			result, err = rules.ResumeTask(ctx, tx, t, h.now(), h.cfg.Timezone)
		case ipc.TypeCancelTask:
			err = rules.CancelTask(ctx, tx, t)
		}
		if err != nil {
			return ruleFailure(err)
		}
		return u.commit(ctx, tx, taskInfo(result, h.cfg.Timezone))
	})
	if err != nil {
		return nil, err
	}
	h.wake()
	h.log.Info().Str("group", string(g.Folder)).Str("task", string(result.ID)).Str("action", string(kind)).Msg("task changed")
	return taskInfo(result, h.cfg.Timezone), nil
}

// taskInfo is a task as the agent sees it, its times in tz.
func taskInfo(t store.Task, tz *time.Location) ipc.TaskInfo {
	info := ipc.TaskInfo{
		ID:            string(t.ID),
		Group:         string(t.Folder),
		Prompt:        t.Prompt,
		ScheduleType:  ipc.ScheduleKind(t.Kind),
		ScheduleValue: t.Value,
		ContextMode:   ipc.ContextMode(t.ContextMode),
		Status:        string(t.Status),
		LastResult:    t.LastResult,
	}
	if t.NextRun != nil {
		info.NextRun = t.NextRun.In(tz).Format(time.RFC3339)
	}
	if t.LastRun != nil {
		info.LastRun = t.LastRun.In(tz).Format(time.RFC3339)
	}
	return info
}

func (h *Host) wake() {
	if h.tasks != nil {
		h.tasks.Wake()
	}
}

// ---- groups ----

func (h *Host) registerGroup(ctx context.Context, u *unit, g store.Group, a ipc.RegisterGroupArgs) (any, error) {
	if !g.IsMain {
		return nil, refused("only the main group can register groups")
	}
	ng, err := rules.Group(rules.NewGroup{
		Chat: a.Chat, Name: a.Name, Folder: a.Folder, Trigger: a.Trigger, RequiresTrigger: a.RequiresTrigger,
	}, h.cfg.AssistantName)
	if err != nil {
		return nil, ruleFailure(err)
	}
	folder := string(ng.Folder)
	var info ipc.GroupInfo
	err = h.db.Tx(ctx, func(tx *store.Tx) error {
		added, err := tx.Groups.Add(ctx, ng)
		if err != nil {
			return err
		}
		info = ipc.GroupInfo{Chat: string(added.Chat), Name: added.Name, Folder: string(added.Folder), Registered: true}
		return u.commit(ctx, tx, info)
	})
	if err != nil {
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrInvalidFolder) {
			return nil, &failure{ErrBadRequest, err.Error()}
		}
		return nil, err
	}
	if err := h.prepareGroup(folder); err != nil {
		uctx := context.WithoutCancel(ctx)
		if rerr := h.db.Tx(uctx, func(tx *store.Tx) error {
			if err := tx.Groups.Remove(uctx, ng.Folder); err != nil {
				return err
			}
			return u.forget(uctx, tx)
		}); rerr != nil {
			h.log.Error().Err(rerr).Str("group", folder).Msg("undo group registration")
		}
		return nil, fmt.Errorf("create the group's directories: %w", err)
	}
	if err := h.SyncGroups(ctx); err != nil {
		h.log.Error().Err(err).Str("group", folder).Msg("watch the new group's requests")
	}
	h.log.Info().Str("group", string(g.Folder)).Str("new_group", folder).Str("chat", info.Chat).Msg("group registered")
	return info, nil
}

func (h *Host) listGroups(ctx context.Context, g store.Group, a ipc.ListGroupsArgs) (any, error) {
	if !g.IsMain {
		return nil, refused("only the main group can list groups")
	}
	if a.Refresh && h.refresh != nil {
		rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
		err := h.refresh.RefreshGroups(rctx)
		cancel()
		if err != nil {
			h.log.Warn().Err(err).Msg("refresh group names; listing the stored ones")
		}
	}
	chats, err := h.db.Chats.List(ctx)
	if err != nil {
		return nil, err
	}
	groups, err := h.db.Groups.List(ctx)
	if err != nil {
		return nil, err
	}
	byChat := make(map[store.ChatID]store.Group, len(groups))
	for _, gr := range groups {
		byChat[gr.Chat] = gr
	}
	out := make([]ipc.GroupInfo, 0, len(chats)+len(groups))
	seen := make(map[store.ChatID]bool, len(chats))
	for _, c := range chats {
		seen[c.ID] = true
		info := ipc.GroupInfo{Chat: string(c.ID), Name: c.Name, Kind: chatKind(c.ID, c.IsGroup)}
		if gr, ok := byChat[c.ID]; ok {
			info.Folder, info.Registered, info.IsMain = string(gr.Folder), true, gr.IsMain
			if info.Name == "" {
				info.Name = gr.Name
			}
		}
		out = append(out, info)
	}
	for _, gr := range groups {
		if !seen[gr.Chat] {
			out = append(out, ipc.GroupInfo{Chat: string(gr.Chat), Name: gr.Name, Folder: string(gr.Folder), Registered: true, IsMain: gr.IsMain,
				Kind: chatKind(gr.Chat, false)})
		}
	}
	return out, nil
}

// chatKind says whether chat is a group, a person or a local chat; isGroup
// is what the channel said of it, the id's form decides otherwise (a
// WhatsApp group id ends in @g.us).
func chatKind(chat store.ChatID, isGroup bool) string {
	switch {
	case strings.HasPrefix(string(chat), "local:"):
		return ipc.ChatLocal
	case isGroup || strings.HasSuffix(string(chat), "@g.us"):
		return ipc.ChatGroup
	}
	return ipc.ChatPerson
}
