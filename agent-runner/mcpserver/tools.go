package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/schedule"
)

// Tool arguments as the agent sends them. The JSON names are fixed (DESIGN
// §9); unknown fields are refused by the derived schemas.

type sendMessageIn struct {
	Text       string `json:"text" jsonschema:"the message to post; with a file, its caption"`
	TargetChat string `json:"target_chat,omitempty" jsonschema:"main group only: the chat id of another registered chat; leave empty for this chat"`
	File       string `json:"file,omitempty" jsonschema:"a file in your workspace to send with the message (text is its caption): a path relative to /workspace/group or under it; JPEG/PNG go as images (16 MiB max), .ogg/.mp3/.m4a as audio (16 MiB), anything else as a document (64 MiB)"`
}

type scheduleTaskIn struct {
	Prompt        string `json:"prompt" jsonschema:"what the agent should do each time the task runs"`
	ScheduleType  string `json:"schedule_type" jsonschema:"cron, interval or once"`
	ScheduleValue string `json:"schedule_value" jsonschema:"the cron expression, the interval (Go duration) or the local time"`
	ContextMode   string `json:"context_mode" jsonschema:"group (resume this chat's conversation) or isolated (fresh conversation, self-contained prompt)"`
	TargetGroup   string `json:"target_group,omitempty" jsonschema:"main group only: the folder of the group the task belongs to; leave empty for this group"`
}

type listTasksIn struct{}

type updateTaskIn struct {
	TaskID        string `json:"task_id" jsonschema:"the task's id, as returned by schedule_task or list_tasks"`
	Prompt        string `json:"prompt,omitempty" jsonschema:"the new prompt; leave out to keep it"`
	ScheduleType  string `json:"schedule_type,omitempty" jsonschema:"the new schedule type (cron, interval or once), given together with schedule_value"`
	ScheduleValue string `json:"schedule_value,omitempty" jsonschema:"the new schedule value, given together with schedule_type"`
}

type taskIDIn struct {
	TaskID string `json:"task_id" jsonschema:"the task's id, as returned by schedule_task or list_tasks"`
}

type registerGroupIn struct {
	Chat            string `json:"chat" jsonschema:"the chat id, as shown by list_groups"`
	Name            string `json:"name" jsonschema:"a display name for the group"`
	Folder          string `json:"folder" jsonschema:"the group's folder: lowercase letters, digits and dashes"`
	Trigger         string `json:"trigger,omitempty" jsonschema:"the word that wakes the agent, such as @Andy; the default when empty"`
	RequiresTrigger *bool  `json:"requires_trigger,omitempty" jsonschema:"false to answer every message in that chat; true (default) to answer only messages starting with the trigger"`
}

type listGroupsIn struct {
	Refresh bool `json:"refresh,omitempty" jsonschema:"true to refresh chat names from WhatsApp first"`
}

// tools implements the MCP tools on top of the host's IPC.
type tools struct {
	cfg  Config
	host caller
}

// errRefused is wrapped by refusals decided here, before anything is written.
var errRefused = errors.New("refused")

func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errRefused, fmt.Sprintf(format, args...))
}

func (t *tools) register(srv *mcp.Server) {
	tz := t.cfg.location().String()

	mcp.AddTool(srv, &mcp.Tool{
		Name: "send_message",
		Description: "Send a message to the chat right away, while you keep working. " +
			"Use it for progress updates during long work, to acknowledge a request before a slow job, " +
			"or to send several separate messages. Do not use it for your final answer: " +
			"your final reply is delivered to the chat automatically (also when you run as a scheduled task), " +
			"so sending it here too would post it twice. To send a file you made (a chart, a PDF, an audio clip), " +
			"save it in your workspace and give its path as file." + t.mainOnlyNote(" target_chat sends to another registered chat."),
		InputSchema: mustSchema[sendMessageIn](nil),
	}, t.sendMessage)

	mcp.AddTool(srv, &mcp.Tool{
		Name: "schedule_task",
		Description: "Schedule work for later or on a repeat. Each time the task runs, an agent gets `prompt` " +
			"and its final output is sent to the chat, like a reply. Write the prompt so it says whether to always report, " +
			"report only when something is noteworthy, or stay silent (text inside <internal>...</internal> is never sent).\n" +
			"schedule_type and schedule_value:\n" +
			"- cron: five fields \"minute hour day-of-month month day-of-week\" in the " + tz + " timezone, " +
			"e.g. \"0 9 * * 1-5\" for 09:00 on weekdays; @daily and @hourly work too.\n" +
			"- interval: a duration such as 30m, 2h or 1h30m (at least 1m), counted from now.\n" +
			"- once: a local time in " + tz + " such as \"2026-11-22 09:30\", or RFC 3339 with an offset.\n" +
			"context_mode:\n" +
			"- group: the task resumes this chat's conversation and knows what was said " +
			"(\"remind me about what we discussed\").\n" +
			"- isolated: the task starts a fresh conversation with no history, so the prompt must be self-contained " +
			"(\"check the weather every morning and tell me if it rains\").\n" +
			"A group may have only so many tasks, and a prompt only so long (16 KiB by default): past either, the call is refused and says why; " +
			"cancel tasks that are no longer needed.\n" +
			"Returns the task id and its next run time." + t.mainOnlyNote(" target_group schedules the task for another group."),
		InputSchema: mustSchema[scheduleTaskIn](map[string][]any{
			"schedule_type": {"cron", "interval", "once"},
			"context_mode":  {"group", "isolated"},
		}),
	}, t.scheduleTask)

	mcp.AddTool(srv, &mcp.Tool{
		Name: "list_tasks",
		Description: "List the scheduled tasks with their id, schedule, status (active, paused, done), next and last run. " +
			"Times are in the " + tz + " timezone.",
		InputSchema: mustSchema[listTasksIn](nil),
	}, t.listTasks)

	mcp.AddTool(srv, &mcp.Tool{
		Name: "update_task",
		Description: "Change a scheduled task's prompt, or its schedule (schedule_type and schedule_value together, " +
			"same formats as schedule_task, in the " + tz + " timezone). Fields left out stay as they are.",
		InputSchema: mustSchema[updateTaskIn](map[string][]any{
			"schedule_type": {"cron", "interval", "once"},
		}),
	}, t.updateTask)

	for _, tt := range []struct {
		kind ipc.RequestType
		desc string
	}{
		{ipc.TypePauseTask, "Pause a scheduled task: it stops running until resume_task."},
		{ipc.TypeResumeTask, "Resume a paused task; its next run is computed from now."},
		{ipc.TypeCancelTask, "Cancel a scheduled task for good."},
	} {
		mcp.AddTool(srv, &mcp.Tool{
			Name:        string(tt.kind),
			Description: tt.desc,
			InputSchema: mustSchema[taskIDIn](nil),
		}, t.taskAction(tt.kind))
	}

	mcp.AddTool(srv, &mcp.Tool{
		Name: "register_group",
		Description: t.mainOnly("Register a chat so its agent answers there. Find the chat id with list_groups. " +
			"The group gets its own folder, memory and agent; it starts receiving messages at once."),
		InputSchema: mustSchema[registerGroupIn](nil),
	}, t.registerGroup)

	mcp.AddTool(srv, &mcp.Tool{
		Name: "list_groups",
		Description: t.mainOnly("List the chats the assistant is in: whether each is a group or a person (a direct chat), which of them are registered, and their folders. " +
			"Use refresh to update chat names from WhatsApp first."),
		InputSchema: mustSchema[listGroupsIn](nil),
	}, t.listGroups)
}

func (t *tools) mainOnly(desc string) string {
	if t.cfg.IsMain {
		return "Main group only. " + desc
	}
	return "Main group only: not available here, calls from this group are refused. " + desc
}

func (t *tools) mainOnlyNote(note string) string {
	if t.cfg.IsMain {
		return "\nMain group only:" + note
	}
	return ""
}

// mustSchema derives T's input schema (unknown properties refused) and adds
// enums for the named properties.
func mustSchema[T any](enums map[string][]any) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("schema for %T: %v", *new(T), err))
	}
	for name, vals := range enums {
		p, ok := s.Properties[name]
		if !ok {
			panic(fmt.Sprintf("schema for %T: no property %q", *new(T), name))
		}
		p.Enum = vals
	}
	return s
}

func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// exchange sends args to the host and returns the response data, or an error
// whose text is what the agent should read.
func (t *tools) exchange(ctx context.Context, req ipc.Request) (json.RawMessage, error) {
	if err := req.Args.Validate(); err != nil {
		return nil, errors.New(cleanErr(err))
	}
	resp, err := t.host.call(ctx, req)
	if errors.Is(err, ErrTimeout) {
		return nil, fmt.Errorf("the host did not answer within %s; the request may still be processed, so check (for example with list_tasks) before trying again", t.host.wait())
	}
	if err != nil {
		return nil, fmt.Errorf("the request could not be delivered to the host: %v", err)
	}
	if !resp.OK {
		return nil, errors.New(resp.Error)
	}
	return resp.Data, nil
}

func (t *tools) sendMessage(ctx context.Context, _ *mcp.CallToolRequest, in sendMessageIn) (*mcp.CallToolResult, any, error) {
	target := strings.TrimSpace(in.TargetChat)
	if target == t.cfg.Chat {
		target = ""
	}
	if target != "" && !t.cfg.IsMain {
		return nil, nil, refusef("only the main group can send to another chat; leave target_chat empty to write to this chat")
	}
	data, err := t.exchange(ctx, ipc.NewRequest(ipc.SendMessageArgs{Text: in.Text, TargetChat: target, File: strings.TrimSpace(in.File)}))
	if err != nil {
		return nil, nil, err
	}
	var res ipc.SendResult
	decoded := decode(data, &res)
	if decoded && res.File != nil {
		to := "this chat"
		if res.Chat != "" && res.Chat != t.cfg.Chat {
			to = res.Chat
		}
		return textResult("Message with %s %s (%d bytes) queued for delivery to %s.", res.File.Kind, res.File.Name, res.File.Size, to), nil, nil
	}
	if decoded && res.Chat != "" && res.Chat != t.cfg.Chat {
		return textResult("Message queued for delivery to %s.", res.Chat), nil, nil
	}
	if target != "" {
		return textResult("Message queued for delivery to %s.", target), nil, nil
	}
	return textResult("Message queued for delivery to this chat."), nil, nil
}

func (t *tools) checkTargetGroup(target string) (string, error) {
	target = strings.TrimSpace(target)
	if target == t.cfg.Group {
		target = ""
	}
	if target != "" && !t.cfg.IsMain {
		return "", refusef("only the main group can manage another group's tasks; leave target_group empty for this group")
	}
	return target, nil
}

// checkSchedule parses a schedule the way the host will, so a bad value is
// refused before anything is written, with the parser's reason.
func (t *tools) checkSchedule(kind, value string) (schedule.Schedule, error) {
	k := schedule.Kind(strings.TrimSpace(kind))
	if !ipc.ValidKind(k) {
		return schedule.Schedule{}, fmt.Errorf("schedule_type must be cron, interval or once, not %q", kind)
	}
	loc := t.cfg.location()
	s, err := schedule.Parse(k, value, loc)
	if err != nil {
		return s, errors.New(cleanErr(err))
	}
	if k == schedule.Once {
		now := time.Now()
		if at := s.First(now, loc); at.Before(now) {
			return s, fmt.Errorf("invalid time %q: it is in the past (now is %s in %s)", value, now.In(loc).Format("2006-01-02 15:04"), loc)
		}
	}
	return s, nil
}

func (t *tools) scheduleTask(ctx context.Context, _ *mcp.CallToolRequest, in scheduleTaskIn) (*mcp.CallToolResult, any, error) {
	target, err := t.checkTargetGroup(in.TargetGroup)
	if err != nil {
		return nil, nil, err
	}
	args := ipc.ScheduleTaskArgs{
		Prompt:        in.Prompt,
		ScheduleType:  schedule.Kind(strings.TrimSpace(in.ScheduleType)),
		ScheduleValue: strings.TrimSpace(in.ScheduleValue),
		ContextMode:   ipc.ContextMode(strings.TrimSpace(in.ContextMode)),
		TargetGroup:   target,
	}
	if err := args.Validate(); err != nil {
		return nil, nil, errors.New(cleanErr(err))
	}
	sched, err := t.checkSchedule(in.ScheduleType, in.ScheduleValue)
	if err != nil {
		return nil, nil, err
	}
	data, err := t.exchange(ctx, ipc.NewRequest(args))
	if err != nil {
		return nil, nil, err
	}
	var info ipc.TaskInfo
	if !decode(data, &info) || info.ID == "" {
		return textResult("Task scheduled (%s %q). The host did not say its id; use list_tasks to find it.", args.ScheduleType, args.ScheduleValue), nil, nil
	}
	next := info.NextRun
	if next == "" {
		next = sched.First(time.Now(), t.cfg.location()).In(t.cfg.location()).Format(time.RFC3339)
	}
	return textResult("Task %s scheduled (%s %q, context %s). Next run: %s (%s).",
		info.ID, args.ScheduleType, args.ScheduleValue, contextOf(info.ContextMode, args.ContextMode), next, t.cfg.location()), nil, nil
}

func contextOf(got, asked ipc.ContextMode) ipc.ContextMode {
	if got != "" {
		return got
	}
	if asked != "" {
		return asked
	}
	return ipc.ContextGroup
}

func (t *tools) listTasks(ctx context.Context, _ *mcp.CallToolRequest, _ listTasksIn) (*mcp.CallToolResult, any, error) {
	data, err := t.exchange(ctx, ipc.NewRequest(ipc.ListTasksArgs{}))
	if err != nil {
		return nil, nil, err
	}
	var list []ipc.TaskInfo
	if !decode(data, &list) {
		return textResult("%s", rawText(data)), nil, nil
	}
	if len(list) == 0 {
		return textResult("No scheduled tasks."), nil, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d scheduled task(s), times in %s:\n", len(list), t.cfg.location())
	for _, ti := range list {
		b.WriteString(formatTask(ti, t.cfg.Group))
		b.WriteByte('\n')
	}
	return textResult("%s", strings.TrimRight(b.String(), "\n")), nil, nil
}

func formatTask(ti ipc.TaskInfo, ownGroup string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- [%s] %s %q", ti.ID, ti.ScheduleType, ti.ScheduleValue)
	if ti.ContextMode != "" {
		fmt.Fprintf(&b, ", context %s", ti.ContextMode)
	}
	if ti.Group != "" && ti.Group != ownGroup {
		fmt.Fprintf(&b, ", group %s", ti.Group)
	}
	if ti.Status != "" {
		fmt.Fprintf(&b, ", %s", ti.Status)
	}
	if ti.NextRun != "" {
		fmt.Fprintf(&b, ", next %s", ti.NextRun)
	}
	if ti.LastRun != "" {
		fmt.Fprintf(&b, ", last %s", ti.LastRun)
	}
	fmt.Fprintf(&b, ": %s", shorten(ti.Prompt, 120))
	if ti.LastResult != "" {
		fmt.Fprintf(&b, " (last result: %s)", shorten(ti.LastResult, 120))
	}
	return b.String()
}

func (t *tools) updateTask(ctx context.Context, _ *mcp.CallToolRequest, in updateTaskIn) (*mcp.CallToolResult, any, error) {
	args := ipc.UpdateTaskArgs{TaskID: strings.TrimSpace(in.TaskID)}
	if in.Prompt != "" {
		args.Prompt = &in.Prompt
	}
	if k := schedule.Kind(strings.TrimSpace(in.ScheduleType)); k != "" {
		args.ScheduleType = &k
	}
	if v := strings.TrimSpace(in.ScheduleValue); v != "" {
		args.ScheduleValue = &v
	}
	if err := args.Validate(); err != nil {
		return nil, nil, errors.New(cleanErr(err))
	}
	if args.ScheduleType != nil {
		if _, err := t.checkSchedule(in.ScheduleType, in.ScheduleValue); err != nil {
			return nil, nil, err
		}
	}
	data, err := t.exchange(ctx, ipc.NewRequest(args))
	if err != nil {
		return nil, nil, err
	}
	var info ipc.TaskInfo
	if decode(data, &info) && info.ID != "" {
		return textResult("Task updated: %s", formatTask(info, t.cfg.Group)[2:]), nil, nil
	}
	return textResult("Task %s updated.", args.TaskID), nil, nil
}

func (t *tools) taskAction(kind ipc.RequestType) func(context.Context, *mcp.CallToolRequest, taskIDIn) (*mcp.CallToolResult, any, error) {
	done := map[ipc.RequestType]string{
		ipc.TypePauseTask:  "paused",
		ipc.TypeResumeTask: "resumed",
		ipc.TypeCancelTask: "cancelled",
	}[kind]
	return func(ctx context.Context, _ *mcp.CallToolRequest, in taskIDIn) (*mcp.CallToolResult, any, error) {
		req, err := ipc.NewTaskIDRequest(kind, strings.TrimSpace(in.TaskID))
		if err != nil {
			return nil, nil, errors.New(cleanErr(err))
		}
		data, err := t.exchange(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		var info ipc.TaskInfo
		if decode(data, &info) && info.ID != "" && info.NextRun != "" && kind == ipc.TypeResumeTask {
			return textResult("Task %s resumed. Next run: %s (%s).", info.ID, info.NextRun, t.cfg.location()), nil, nil
		}
		return textResult("Task %s %s.", strings.TrimSpace(in.TaskID), done), nil, nil
	}
}

func (t *tools) registerGroup(ctx context.Context, _ *mcp.CallToolRequest, in registerGroupIn) (*mcp.CallToolResult, any, error) {
	if !t.cfg.IsMain {
		return nil, nil, refusef("only the main group can register groups")
	}
	args := ipc.RegisterGroupArgs{
		Chat:            strings.TrimSpace(in.Chat),
		Name:            strings.TrimSpace(in.Name),
		Folder:          strings.TrimSpace(in.Folder),
		Trigger:         strings.TrimSpace(in.Trigger),
		RequiresTrigger: in.RequiresTrigger,
	}
	data, err := t.exchange(ctx, ipc.NewRequest(args))
	if err != nil {
		return nil, nil, err
	}
	var g ipc.GroupInfo
	if decode(data, &g) && g.Folder != "" {
		return textResult("Group %q (%s) registered with folder %s; its agent answers there from now on.", g.Name, g.Chat, g.Folder), nil, nil
	}
	return textResult("Group %q (%s) registered with folder %s; its agent answers there from now on.", args.Name, args.Chat, args.Folder), nil, nil
}

func (t *tools) listGroups(ctx context.Context, _ *mcp.CallToolRequest, in listGroupsIn) (*mcp.CallToolResult, any, error) {
	if !t.cfg.IsMain {
		return nil, nil, refusef("only the main group can list groups")
	}
	data, err := t.exchange(ctx, ipc.NewRequest(ipc.ListGroupsArgs{Refresh: in.Refresh}))
	if err != nil {
		return nil, nil, err
	}
	var list []ipc.GroupInfo
	if !decode(data, &list) {
		return textResult("%s", rawText(data)), nil, nil
	}
	if len(list) == 0 {
		return textResult("No chats known yet."), nil, nil
	}
	var b strings.Builder
	for _, g := range list {
		fmt.Fprintf(&b, "- %q chat %s", g.Name, g.Chat)
		switch g.Kind {
		case ipc.ChatGroup:
			b.WriteString(" (a group)")
		case ipc.ChatPerson:
			b.WriteString(" (a person, direct chat)")
		case ipc.ChatLocal:
			b.WriteString(" (a local terminal chat)")
		}
		b.WriteString(": ")
		switch {
		case g.Registered && g.IsMain:
			fmt.Fprintf(&b, "registered, folder %s (main)\n", g.Folder)
		case g.Registered:
			fmt.Fprintf(&b, "registered, folder %s\n", g.Folder)
		default:
			b.WriteString("not registered\n")
		}
	}
	return textResult("%s", strings.TrimRight(b.String(), "\n")), nil, nil
}

// decode reports whether data decodes into v.
func decode(data json.RawMessage, v any) bool {
	if len(data) == 0 {
		return false
	}
	return json.Unmarshal(data, v) == nil
}

func rawText(data json.RawMessage) string {
	if len(data) == 0 {
		return "Done."
	}
	return string(data)
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
