package nanoclaw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/container"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/rules"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// MaxFile is the largest file of a group's folder the import copies.
const MaxFile = 64 << 20

// sessionSlug is the directory under .claude/projects that holds the
// transcripts of sessions made in /workspace/group, the working directory
// of NanoClaw's agents and of bridged's alike.
const sessionSlug = "-workspace-group"

// Target is the bridged install the import goes into.
type Target struct {
	DB        *store.DB // nil: no database yet (nothing is there)
	Home      home.Layout
	Allowlist string   // bridged's mount allowlist file
	Protect   []string // paths no mount may reach (the home, the env file)
	Assistant string   // the assistant's name, for default triggers
	Loc       *time.Location
	Now       time.Time
}

// Step is one thing the import does.
type Step struct {
	Text string
	do   func(ctx context.Context, a *applier) error
}

// Skip is something that is not carried over, and why.
type Skip struct{ What, Why string }

// Plan is what an import would do: its steps in order, what bridged holds
// already, what is not carried over (and why), and what the owner must do.
type Plan struct {
	Steps   []Step
	Have    []string
	Skipped []Skip
	Notes   []string
}

func (p *Plan) step(text string, do func(context.Context, *applier) error) {
	p.Steps = append(p.Steps, Step{Text: text, do: do})
}

func (p *Plan) skip(what, format string, args ...any) {
	p.Skipped = append(p.Skipped, Skip{What: what, Why: fmt.Sprintf(format, args...)})
}

func (p *Plan) have(format string, args ...any) {
	p.Have = append(p.Have, fmt.Sprintf(format, args...))
}

// planner builds a Plan.
type planner struct {
	in      *Install
	t       Target
	p       *Plan
	al      *container.Allowlist // the allowlist in force after the import
	folders map[string]store.Group
	groups  map[string]store.Group // by chat id, as bridged will hold them
	mainSet bool
}

// MakePlan works out what importing in into t does; nothing is written.
func MakePlan(ctx context.Context, in *Install, t Target) (*Plan, error) {
	if t.Loc == nil {
		t.Loc = time.UTC
	}
	pl := &planner{in: in, t: t, p: &Plan{}, folders: map[string]store.Group{}, groups: map[string]store.Group{}}
	if t.DB != nil {
		gs, err := t.DB.Groups.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			pl.folders[string(g.Folder)] = g
			pl.groups[string(g.Chat)] = g
			pl.mainSet = pl.mainSet || g.IsMain
		}
	}
	if err := pl.mountAllowlist(); err != nil {
		return nil, err
	}
	if in.SendersErr != nil {
		pl.p.skip("the sender allow list", "%v; no group gets an allow list from it (NanoClaw ignored the file too and let everyone through): set one with `bridged groups set --allow`", in.SendersErr)
	}
	if in.Senders != nil {
		for _, jid := range in.Senders.Bad {
			pl.p.skip("the sender allow list's entry for "+jid, "not valid (want allow \"*\" or a list of ids, mode trigger or drop); NanoClaw skipped it too")
		}
	}
	imported := pl.registeredGroups()
	pl.folderFiles(imported)
	if err := pl.sessions(ctx, imported); err != nil {
		return nil, err
	}
	if err := pl.tasks(ctx, imported); err != nil {
		return nil, err
	}
	if err := pl.messages(ctx, imported); err != nil {
		return nil, err
	}
	if in.TaskRuns > 0 {
		pl.p.skip(fmt.Sprintf("the run history of the tasks (%s)", plural(in.TaskRuns, "run", "runs")), "bridged's run log records the runs it makes itself")
	}
	pl.p.Notes = append(pl.p.Notes, "WhatsApp must be paired again: NanoClaw's pairing (Baileys, store/auth) is not one bridged's WhatsApp library (whatsmeow) can use. "+
		"Stop NanoClaw, run `bridged login` and scan the code with the phone (WhatsApp > Linked devices > Link a device); then remove NanoClaw's old linked device there.")
	return pl.p, nil
}

// mountAllowlist plans NanoClaw's mount allowlist and loads the one in
// force after the import, for the groups' mounts.
func (pl *planner) mountAllowlist() error {
	var write []byte
	in := pl.in
	switch {
	case in.MountsErr != nil:
		pl.p.skip("the mount allowlist", "%v; no extra mount is carried over unless bridged's own allowlist allows it", in.MountsErr)
	case in.Mounts != nil && pl.t.Allowlist == "":
		pl.p.skip("the mount allowlist", "bridged runs without one (BRIDGED_MOUNT_ALLOWLIST is empty)")
	case in.Mounts != nil:
		b, err := json.MarshalIndent(in.Mounts, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		old, err := os.ReadFile(pl.t.Allowlist)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			write = b
			pl.p.step(fmt.Sprintf("mount allowlist: write %s (%s, as NanoClaw's)", pl.t.Allowlist, plural(len(in.Mounts.AllowedRoots), "allowed root", "allowed roots")), func(_ context.Context, a *applier) error {
				return writeNewFile(pl.t.Allowlist, b)
			})
		case err != nil:
			return fmt.Errorf("read bridged's mount allowlist: %w", err)
		case bytes.Equal(old, b):
			pl.p.have("the mount allowlist %s", pl.t.Allowlist)
		default:
			pl.p.skip("NanoClaw's mount allowlist", "bridged's own %s is kept as it is; compare it with %s and merge by hand", pl.t.Allowlist, filepath.Join(in.ConfigDir, "mount-allowlist.json"))
		}
	}
	if pl.t.Allowlist == "" {
		return nil
	}
	// The groups' mounts are checked against the allowlist as it will be.
	var al *container.Allowlist
	var err error
	if write != nil {
		al, err = container.ParseAllowlist(pl.t.Allowlist, write, pl.t.Protect...)
	} else {
		al, err = container.LoadAllowlist(pl.t.Allowlist, pl.t.Protect...)
	}
	if err != nil {
		pl.p.skip("the groups' extra mounts", "%s", err)
		return nil
	}
	pl.al = al.WithMasks(pl.t.Home)
	return nil
}

// plural is n and the noun, plural when n is not 1.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// imported is a NanoClaw group as bridged holds (or will hold) it.
type imported struct {
	src    Group
	folder string
	chat   store.ChatID
}

func (pl *planner) registeredGroups() []imported {
	var out []imported
	for _, g := range pl.in.Groups {
		what := fmt.Sprintf("group %q (%s, folder %s)", g.Name, g.JID, g.Folder)
		if have, ok := pl.groups[g.JID]; ok {
			pl.p.have("group %s (%s)", have.Folder, g.JID)
			out = append(out, imported{src: g, folder: string(have.Folder), chat: have.Chat})
			continue
		}
		folder := g.Folder
		if store.ValidateFolder(folder) != nil || folder == home.GlobalFolder {
			alt := rules.Slug(folder)
			if alt == "" || alt == home.GlobalFolder || store.ValidateFolder(alt) != nil {
				pl.p.skip(what, "its folder name is not one bridged accepts (lowercase letters, digits and dashes)")
				continue
			}
			folder = alt
		}
		if other, ok := pl.folders[folder]; ok {
			pl.p.skip(what, "bridged's folder %s already belongs to chat %s", folder, other.Chat)
			continue
		}
		isMain := g.IsMain
		var notes []string
		if isMain && pl.mainSet {
			isMain = false
			notes = append(notes, "not main: bridged has a main group already")
		}
		requires := g.RequiresTrigger
		ng, err := rules.Group(rules.NewGroup{Chat: g.JID, Name: g.Name, Folder: folder, Trigger: g.Trigger, RequiresTrigger: &requires, IsMain: isMain}, pl.t.Assistant)
		if err != nil {
			pl.p.skip(what, "%v", err)
			continue
		}
		if folder != g.Folder {
			notes = append(notes, "folder "+g.Folder+" becomes "+folder)
		}
		if g.TimeoutMS > 0 {
			ng.ContainerConfig.Timeout = time.Duration(g.TimeoutMS) * time.Millisecond
		}
		if g.ConfigErr != nil {
			pl.p.skip(what+": its container settings", "not valid JSON: %v", g.ConfigErr)
		}
		notes = append(notes, pl.mounts(what, &ng)...)
		notes = append(notes, pl.senders(what, &ng)...)
		if !ng.IsMain {
			notes = append(notes, "tools "+string(ng.Tools)+" (NanoClaw let every agent run any tool; `bridged groups set --tools full "+folder+"` gives that back)")
		}
		gcopy := ng
		text := fmt.Sprintf("register group %s: %q, chat %s, trigger %s", folder, ng.Name, ng.Chat, describeTrigger(ng))
		if len(notes) > 0 {
			text += "; " + strings.Join(notes, "; ")
		}
		pl.p.step(text, func(ctx context.Context, a *applier) error {
			_, err := a.db.Groups.Add(ctx, gcopy)
			return err
		})
		pl.folders[folder] = ng
		pl.groups[g.JID] = ng
		pl.mainSet = pl.mainSet || ng.IsMain
		out = append(out, imported{src: g, folder: folder, chat: ng.Chat})
	}
	return out
}

func describeTrigger(g store.Group) string {
	switch {
	case g.IsMain:
		return g.Trigger + " (main: answers every message)"
	case !g.RequiresTrigger:
		return g.Trigger + " (answers every message)"
	}
	return g.Trigger
}

// mounts carries g's extra mounts that bridged's allowlist grants.
func (pl *planner) mounts(what string, g *store.Group) []string {
	var src Group
	for _, s := range pl.in.Groups {
		if s.JID == string(g.Chat) {
			src = s
		}
	}
	var granted []string
	for _, m := range src.Mounts {
		req := store.MountRequest{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadWrite: m.Readonly != nil && !*m.Readonly}
		if req.ContainerPath == "" {
			req.ContainerPath = path.Base(filepath.ToSlash(strings.TrimRight(m.HostPath, "/")))
		}
		mw := fmt.Sprintf("%s: extra mount %s", what, rules.FormatMount(req))
		if pl.al == nil {
			pl.p.skip(mw, "bridged has no mount allowlist to allow it")
			continue
		}
		creq := container.MountRequest{HostPath: req.HostPath, ContainerPath: req.ContainerPath, ReadWrite: req.ReadWrite}
		if err := pl.al.Validate([]container.MountRequest{creq}, g.IsMain); err != nil {
			pl.p.skip(mw, "%s", err)
			continue
		}
		g.ContainerConfig.ExtraMounts = append(g.ContainerConfig.ExtraMounts, req)
		granted = append(granted, rules.FormatMount(req))
	}
	if len(granted) == 0 {
		return nil
	}
	return []string{"extra mounts " + strings.Join(granted, ", ")}
}

// senders carries the sender allow list's entry for g's chat (or the
// default one) as g's --allow and --others.
func (pl *planner) senders(what string, g *store.Group) []string {
	sa := pl.in.Senders
	if sa == nil {
		return nil
	}
	e, ok := sa.Chats[string(g.Chat)]
	if !ok {
		e = *sa.Default
	}
	if e.All {
		return nil
	}
	var allow []string
	for _, s := range e.Allow {
		n, err := store.NormalizeSender(s)
		if err != nil {
			pl.p.skip(what+": allowed sender "+strconv.Quote(s), "%v", err)
			continue
		}
		allow = append(allow, n)
	}
	if len(allow) == 0 {
		// Nobody NanoClaw let through can be named: the owner only.
		allow = []string{store.AllowOwner}
	}
	g.Allow = allow
	g.Others = store.OthersContext
	if e.Mode == "drop" {
		g.Others = store.OthersDrop
	}
	return []string{"allow " + strings.Join(allow, ",") + ", others " + g.Others}
}

// folderFiles plans the copy of each group's folder and of groups/global.
func (pl *planner) folderFiles(gs []imported) {
	for _, g := range gs {
		pl.copyTree(filepath.Join(pl.in.Dir, "groups", g.src.Folder), "groups/"+g.folder, g.folder, func(h *home.Home) (*home.Tree, error) {
			return h.Group(g.folder)
		})
	}
	pl.copyTree(filepath.Join(pl.in.Dir, "groups", home.GlobalFolder), "groups/global (the memory every group shares)", home.GlobalFolder, func(h *home.Home) (*home.Tree, error) {
		return h.Global()
	})
}

type fileCopy struct {
	rel  string
	src  string // the file to copy; read again on apply, so a plan holds no file's bytes
	data []byte // the bytes to write when src is empty
	perm os.FileMode
}

// copyTree plans copying the regular files under src (never following a
// link) into bridged's groups/<folder>, which open opens on apply. What is
// already there is read through internal/home, creating nothing.
func (pl *planner) copyTree(src, what, folder string, open func(*home.Home) (*home.Tree, error)) {
	var files []fileCopy
	var have int
	var root *home.Tree // nil: nothing is there yet
	if h, err := home.New(pl.t.Home.Dir, zerolog.Nop()); err == nil {
		if t, ok, err := h.Existing(folder); err == nil && ok {
			root = t
			defer root.Close()
		}
	}
	err := walkSource(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			pl.p.skip(what+": "+p, "cannot be read: %v", err)
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			pl.p.skip(what+": "+rel, "a symbolic link: links are not followed nor copied")
			return nil
		case !d.Type().IsRegular():
			pl.p.skip(what+": "+rel, "not a regular file")
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			pl.p.skip(what+": "+rel, "cannot be read: %v", err)
			return nil
		}
		if fi.Size() > MaxFile {
			pl.p.skip(what+": "+rel, "larger than %d MiB", MaxFile>>20)
			return nil
		}
		data, err := readRegular(p, MaxFile)
		if err != nil {
			pl.p.skip(what+": "+rel, "cannot be read: %v", err)
			return nil
		}
		if root != nil {
			if old, err := readRoot(root, rel); err == nil {
				if bytes.Equal(old, data) {
					have++
				} else {
					pl.p.skip(what+": "+rel, "bridged has a different file there; it is left as it is")
				}
				return nil
			}
		}
		perm := os.FileMode(0o644)
		if fi.Mode()&0o111 != 0 {
			perm = 0o755
		}
		files = append(files, fileCopy{rel: rel, src: p, perm: perm})
		return nil
	})
	if err != nil {
		pl.p.skip(what, "cannot be read: %v", err)
	}
	if have > 0 {
		pl.p.have("%s: %s", what, plural(have, "file", "files"))
	}
	if len(files) == 0 {
		return
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, f.rel)
	}
	pl.p.step(fmt.Sprintf("%s: copy %s (%s)", what, plural(len(files), "file", "files"), abbreviate(names, 5)), func(_ context.Context, a *applier) error {
		t, err := open(a.home)
		if err != nil {
			return err
		}
		defer t.Close()
		for _, f := range files {
			if err := writeInto(t, f); err != nil {
				return err
			}
		}
		return nil
	})
}

func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(", and %d more", len(names)-n)
}

// writeInto writes f under t, making its directories.
func writeInto(t *home.Tree, f fileCopy) error {
	if f.src != "" {
		data, err := readRegular(f.src, MaxFile)
		if err != nil {
			return err
		}
		if len(data) > MaxFile {
			return fmt.Errorf("%s: grew larger than %d MiB", f.src, MaxFile>>20)
		}
		f.data = data
	}
	dir, name := path.Split(f.rel)
	target := t
	if dir = strings.TrimSuffix(dir, "/"); dir != "" {
		sub, err := t.Dir(dir)
		if err != nil {
			return err
		}
		defer sub.Close()
		target = sub
	}
	_, err := target.WriteNew(name, f.data, f.perm)
	return err
}

func readRoot(root *home.Tree, rel string) ([]byte, error) {
	f, err := root.OpenFile(rel, MaxFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case err != nil:
		return []byte{}, nil // something else is there: never equal to a file
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFile+1))
}

// sessions plans carrying each group's Claude session over.
func (pl *planner) sessions(ctx context.Context, gs []imported) error {
	for _, g := range gs {
		sid, ok := pl.in.Sessions[g.src.Folder]
		if !ok || sid == "" {
			continue
		}
		what := fmt.Sprintf("Claude session %s of group %s", sid, g.folder)
		if pl.t.DB != nil {
			s, err := pl.t.DB.Sessions.Get(ctx, store.Folder(g.folder))
			if err != nil {
				return err
			}
			switch {
			case s.SessionID == sid:
				pl.p.have("%s", what)
				continue
			case s.SessionID != "":
				pl.p.skip(what, "bridged has a session of its own for the group (%s); it is kept", s.SessionID)
				continue
			}
		}
		if !safeID(sid) {
			pl.p.skip(what, "not a session id Claude makes")
			continue
		}
		src := filepath.Join(pl.in.Dir, "data", "sessions", g.src.Folder, ".claude", "projects", sessionSlug, sid+".jsonl")
		data, err := readRegular(src, MaxFile)
		if err != nil || len(data) > MaxFile {
			pl.p.skip(what, "its transcript (%s) cannot be read, so it cannot be resumed; the group's next turn starts a new session", src)
			continue
		}
		folder := g.folder
		pl.p.step(what+": resumable, carried over with its transcript", func(ctx context.Context, a *applier) error {
			t, err := a.home.Claude(folder)
			if err != nil {
				return err
			}
			defer t.Close()
			if err := writeInto(t, fileCopy{rel: "projects/" + sessionSlug + "/" + sid + ".jsonl", data: data, perm: 0o600}); err != nil {
				return err
			}
			return a.db.Sessions.Set(ctx, store.Session{Folder: store.Folder(folder), SessionID: sid})
		})
	}
	return nil
}

func safeID(s string) bool {
	return s != "" && len(s) <= 100 && !strings.ContainsFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' && r != '_'
	})
}

// tasks plans the scheduled tasks of the imported groups.
func (pl *planner) tasks(ctx context.Context, gs []imported) error {
	byFolder := map[string]imported{}
	for _, g := range gs {
		byFolder[g.src.Folder] = g
	}
	for _, k := range pl.in.Tasks {
		what := fmt.Sprintf("task %s (%s %q)", k.ID, k.Type, k.Value)
		g, ok := byFolder[k.Folder]
		if !ok {
			pl.p.skip(what, "its group %s is not imported", k.Folder)
			continue
		}
		if pl.t.DB != nil {
			if _, err := pl.t.DB.Tasks.Get(ctx, store.TaskID(k.ID)); err == nil {
				pl.p.have("task %s", k.ID)
				continue
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if k.Status == "completed" {
			pl.p.skip(what, "completed in NanoClaw: nothing is left to run")
			continue
		}
		if strings.TrimSpace(k.Script) != "" {
			pl.p.skip(what, "it runs a script before waking the agent, which bridged's tasks do not do; have the agent schedule it again without the script if it should still run")
			continue
		}
		t, note, err := pl.task(k, g)
		if err != nil {
			pl.p.skip(what, "%v", err)
			continue
		}
		text := fmt.Sprintf("task %s of group %s: %s %s, context %s, %s", t.ID, t.Folder, t.Kind, t.Value, t.ContextMode, t.Status)
		if t.NextRun != nil && t.Status == store.TaskActive {
			text += ", next run " + t.NextRun.In(pl.t.Loc).Format("2006-01-02 15:04")
		}
		if note != "" {
			text += " (" + note + ")"
		}
		pl.p.step(text, func(ctx context.Context, a *applier) error {
			_, err := a.db.Tasks.Import(ctx, t)
			return err
		})
	}
	return nil
}

func (pl *planner) task(k Task, g imported) (store.Task, string, error) {
	now, loc := pl.t.Now, pl.t.Loc
	kind, value := schedule.Kind(k.Type), strings.TrimSpace(k.Value)
	if kind == schedule.Interval {
		ms, err := strconv.ParseInt(value, 10, 64)
		if err != nil || ms <= 0 {
			return store.Task{}, "", fmt.Errorf("interval %q is not a number of milliseconds", value)
		}
		value = (time.Duration(ms) * time.Millisecond).String()
	}
	sc, err := schedule.Parse(kind, value, loc)
	if err != nil {
		return store.Task{}, "", err
	}
	mode := store.ContextMode(k.ContextMode)
	if mode != store.ContextGroup {
		mode = store.ContextIsolated
	}
	t := store.Task{ID: store.TaskID(k.ID), Folder: store.Folder(g.folder), Chat: g.chat, Prompt: k.Prompt, Kind: store.TaskKind(kind), Value: sc.Value,
		ContextMode: mode, Status: store.TaskActive, LastRun: k.LastRun, LastResult: k.LastResult, CreatedAt: k.CreatedAt, PromptBy: store.Folder(g.folder)}
	var note string
	next := k.NextRun
	switch {
	case k.Status == "paused":
		t.Status = store.TaskPaused
		note = "paused in NanoClaw; `bridged tasks resume " + k.ID + "` starts it"
	case k.Status != "active":
		return store.Task{}, "", fmt.Errorf("unknown status %q", k.Status)
	case kind == schedule.Once:
		at := sc.First(now, loc)
		next = &at
		if at.Before(now.Add(-rules.OnceSlack)) {
			t.Status = store.TaskPaused
			t.LastResult = "imported paused: its time had passed when it was imported"
			note = "its time " + at.In(loc).Format("2006-01-02 15:04") + " has passed: imported paused, not run; `bridged tasks resume " + k.ID + "` runs it now"
		}
	case next == nil || next.Before(now):
		due := now
		if next != nil {
			due = *next
		}
		n := sc.Next(due, now, loc)
		if n.IsZero() {
			n = sc.First(now, loc)
		}
		next = &n
		if k.NextRun != nil {
			note = "runs missed while moving are skipped"
		}
	}
	if next != nil {
		n := next.UTC()
		t.NextRun = &n
	}
	return t, note, nil
}

// messages plans the message history of the imported groups' chats.
func (pl *planner) messages(ctx context.Context, gs []imported) error {
	chats := map[string]imported{}
	for _, g := range gs {
		chats[g.src.JID] = g
	}
	byChat := map[string][]Message{}
	other := map[string]int{}
	for _, m := range pl.in.Messages {
		if _, ok := chats[m.JID]; !ok {
			other[m.JID]++
			continue
		}
		byChat[m.JID] = append(byChat[m.JID], m)
	}
	if len(other) > 0 {
		n := 0
		for _, c := range other {
			n += c
		}
		pl.p.skip(fmt.Sprintf("%s of %s that are not imported groups", plural(n, "message", "messages"), plural(len(other), "chat", "chats")), "bridged keeps the text of registered groups' chats only")
	}
	jids := make([]string, 0, len(byChat))
	for j := range byChat {
		jids = append(jids, j)
	}
	sort.Strings(jids)
	for _, jid := range jids {
		g := chats[jid]
		var stored map[string]store.MessageID
		if pl.t.DB != nil {
			var err error
			if stored, err = pl.t.DB.Messages.ExternalIDs(ctx, g.chat); err != nil {
				return err
			}
		}
		var todo []Message
		for _, m := range byChat[jid] {
			if _, ok := stored[m.ID]; ok || m.ID == "" || strings.TrimSpace(m.Content) == "" {
				continue
			}
			todo = append(todo, m)
		}
		if n := len(byChat[jid]) - len(todo); n > 0 && len(stored) > 0 {
			pl.p.have("%s of group %s", plural(n, "message", "messages"), g.folder)
		}
		if len(todo) == 0 {
			continue
		}
		seen, hasSeen := pl.in.AgentSeen[jid]
		pending := 0
		for _, m := range todo {
			if hasSeen && m.At.After(seen) {
				pending++
			}
		}
		text := fmt.Sprintf("group %s: %s of history", g.folder, plural(len(todo), "message", "messages"))
		if pending > 0 {
			if pending == 1 {
				text += "; the last one, which its agent had not seen, goes to it as context with the next message that wakes it"
			} else {
				text += fmt.Sprintf("; the last %d, which its agent had not seen, go to it as context with the next message that wakes it", pending)
			}
		}
		chat := pl.in.Chats[jid]
		pl.p.step(text, func(ctx context.Context, a *applier) error {
			return a.db.Tx(ctx, func(tx *store.Tx) error {
				c := store.Chat{ID: g.chat, Name: chat.Name, Channel: chat.Channel, IsGroup: chat.IsGroup}
				var cursor store.MessageID
				for _, m := range todo {
					id, _, err := tx.Messages.InsertIn(ctx, c, store.Message{Chat: g.chat, ExternalID: m.ID, Sender: m.Sender, SenderName: m.SenderName, Text: m.Content,
						SentAt: m.At, FromMe: m.FromMe, IsBot: m.IsBot, Late: true})
					if err != nil {
						return err
					}
					if id != 0 && (!hasSeen || !m.At.After(seen)) {
						cursor = max(cursor, id)
					}
				}
				old, err := tx.Sessions.Cursor(ctx, store.Folder(g.folder))
				if err != nil || old != 0 || cursor == 0 {
					return err
				}
				return tx.Sessions.SetCursor(ctx, store.Folder(g.folder), cursor)
			})
		})
	}
	return nil
}
