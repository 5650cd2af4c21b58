package control

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/store"
)

// maxText caps a posted message's text.
const maxText = 64 << 10

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Status assembles the full status: the store's part and the live part.
func (s *Server) Status(ctx context.Context) (Status, error) {
	st, err := s.opts.Admin.Status(ctx)
	if err != nil {
		return Status{}, err
	}
	st.Running = true
	st.Daemon = &Daemon{PID: os.Getpid(), Version: s.opts.Version, Instance: s.opts.Instance, Started: s.started}
	for _, c := range s.opts.Channels {
		cs := c.Status()
		st.Channels = append(st.Channels, channelStatus(c.Name(), cs))
	}
	if s.opts.Status != nil {
		live := s.opts.Status.Live()
		st.Containers = live.Containers
		st.Queue = live.Queue
		st.APIUsage = live.APIUsage
		seen := make(map[Failure]bool, len(st.Failures))
		for _, f := range st.Failures {
			seen[Failure{Kind: f.Kind, Where: f.Where, Error: f.Error}] = true
		}
		for _, f := range live.Failures {
			// A failed task run is in the store's run log too.
			if !seen[Failure{Kind: f.Kind, Where: f.Where, Error: f.Error}] {
				st.Failures = append(st.Failures, f)
			}
		}
		st.Failures = sortFailures(st.Failures)
	}
	if s.opts.Config != nil {
		c := s.opts.Config.DaemonConfig().Credential
		st.Credential = &c
	}
	return st, nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) syncGroups(ctx context.Context) {
	if s.opts.Groups != nil {
		if err := s.opts.Groups.SyncGroups(ctx); err != nil {
			s.log.Warn().Err(err).Msg("sync groups after change")
		}
	}
}

func (s *Server) wakeTasks() {
	if s.opts.Tasks != nil {
		s.opts.Tasks.Wake()
	}
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	list := s.opts.Admin.Groups
	if q := r.URL.Query(); q.Has("find") {
		list = func(ctx context.Context) ([]Group, error) { return s.opts.Admin.FindGroups(ctx, q.Get("find")) }
	}
	gs, err := list(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, gs)
}

func (s *Server) addGroup(w http.ResponseWriter, r *http.Request) {
	var req GroupAdd
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.opts.Admin.AddGroup(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("group", g.Folder).Str("chat", g.Chat).Bool("main", g.IsMain).Msg("group registered")
	s.syncGroups(r.Context())
	writeJSON(w, http.StatusCreated, g)
}

func (s *Server) removeGroup(w http.ResponseWriter, r *http.Request) {
	folder := r.PathValue("folder")
	if err := s.opts.Admin.RemoveGroup(r.Context(), folder); err != nil {
		s.fail(w, r, err)
		return
	}
	// Its running agent, if any, is stopped: at once when idle, else
	// when its turn ends (the settings applier retires a removed group's
	// run).
	if a, ok := s.opts.Groups.(SettingsApplier); ok {
		if _, err := a.ApplySettings(r.Context(), folder); err != nil {
			s.log.Warn().Err(err).Str("group", folder).Msg("cannot stop the removed group's running agent")
		}
		// The main group no longer sees the removed group's folder
		// (store.GroupTx.Remove): a main agent that did is restarted.
		if main, err := s.opts.Admin.DB.Groups.Main(r.Context()); err == nil {
			if _, err := a.ApplySettings(r.Context(), string(main.Folder)); err != nil {
				s.log.Warn().Err(err).Str("group", string(main.Folder)).Msg("cannot apply the group's settings to its running agent")
			}
		}
	}
	s.log.Info().Str("group", folder).Msg("group removed")
	s.syncGroups(r.Context())
	s.wakeTasks()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) updateGroup(w http.ResponseWriter, r *http.Request) {
	var p GroupPatch
	if err := decode(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.opts.Admin.UpdateGroup(r.Context(), r.PathValue("folder"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if a, ok := s.opts.Groups.(SettingsApplier); ok {
		applies, err := a.ApplySettings(r.Context(), g.Folder)
		if err != nil {
			// The change is stored all the same, and the router pipes
			// no message into a container started with other settings.
			s.log.Warn().Err(err).Str("group", g.Folder).Msg("cannot apply the group's settings to its running agent")
		} else {
			g.Applies = applies
		}
	}
	s.log.Info().Str("group", g.Folder).Str("applies", g.Applies).Msg("group updated")
	s.syncGroups(r.Context())
	writeJSON(w, http.StatusOK, g)
}

// endSession ends a group's Claude session: the running daemon's router
// does it (SessionEnder), else the store alone.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	folder := r.PathValue("folder")
	var (
		applies string
		err     error
	)
	if e, ok := s.opts.Groups.(SessionEnder); ok {
		applies, err = e.EndSession(r.Context(), folder)
	} else {
		applies, err = s.opts.Admin.EndSession(r.Context(), folder)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("group", folder).Str("applies", applies).Msg("group session ended")
	writeJSON(w, http.StatusOK, SessionEnded{Folder: folder, Applies: applies})
}

func (s *Server) listChats(w http.ResponseWriter, r *http.Request) {
	cs, err := s.opts.Admin.Chats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cs)
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	ts, err := s.opts.Admin.Tasks(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) addTask(w http.ResponseWriter, r *http.Request) {
	var req TaskAdd
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.opts.Admin.AddTask(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("task", t.ID).Str("group", t.Folder).Str("kind", t.Kind).Msg("task scheduled by the owner")
	s.wakeTasks()
	writeJSON(w, http.StatusCreated, t)
}

func (s *Server) taskAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	var (
		t   Task
		err error
	)
	switch action {
	case "pause":
		t, err = s.opts.Admin.PauseTask(ctx, id)
	case "resume":
		t, err = s.opts.Admin.ResumeTask(ctx, id)
	case "cancel":
		err = s.opts.Admin.CancelTask(ctx, id)
	default:
		writeError(w, http.StatusNotFound, fmt.Errorf("unknown task action %q: want pause, resume or cancel", action))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info().Str("task", id).Str("action", action).Msg("task changed")
	s.wakeTasks()
	if action == "cancel" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) taskRuns(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a whole number", v))
			return
		}
		limit = n
	}
	runs, err := s.opts.Admin.TaskRuns(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

// localChat checks that the path's chat is a registered local chat.
func (s *Server) localChat(ctx context.Context, chat string) error {
	if !IsLocalChat(chat) {
		return fmt.Errorf("%w: chat %q is not a local chat (local:<name>)", ErrInvalid, chat)
	}
	if _, err := s.opts.Admin.DB.Groups.ByChat(ctx, store.ChatID(chat)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no group is registered for chat %s: %w", chat, store.ErrNotFound)
		}
		return err
	}
	if s.opts.Local == nil {
		return fmt.Errorf("%w: the local channel is not available", ErrNotRunning)
	}
	return nil
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	chat := r.PathValue("chat")
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(ct, "multipart/") {
		s.postFiles(w, r, chat, ct)
		return
	}
	var req PostMessage
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkText(req.Text, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.localChat(r.Context(), chat); err != nil {
		s.fail(w, r, err)
		return
	}
	ids, err := s.post(r.Context(), chat, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, posted(ids))
}

// post posts req to chat, as the owner or, with req.As, another member.
func (s *Server) post(ctx context.Context, chat string, req PostMessage, media ...channel.Media) ([]store.MessageID, error) {
	if req.As != "" {
		return s.opts.Local.PostAs(ctx, chat, req.As, req.Text, media...)
	}
	return s.opts.Local.Post(ctx, chat, req.Sender, req.Text, media...)
}

// checkText checks a posted message's text; it may be blank only when
// files come with it.
func checkText(text string, files bool) error {
	switch {
	case !files && strings.TrimSpace(text) == "":
		return fmt.Errorf("%w: the text is empty", ErrInvalid)
	case len(text) > maxText:
		return fmt.Errorf("%w: the text is longer than %d bytes", ErrInvalid, maxText)
	}
	return nil
}

// posted is the answer for the messages stored under ids.
func posted(ids []store.MessageID) Posted {
	p := Posted{IDs: make([]int64, len(ids))}
	for i, id := range ids {
		p.IDs[i] = int64(id)
	}
	if len(ids) > 0 {
		p.ID = p.IDs[len(ids)-1]
	}
	return p
}

// getMessages answers with the chat's messages after ?after=ID. With
// ?wait=D (at most MaxWait) and nothing to return yet, it waits until a
// message is stored, D passes, or the server stops; then it answers with what
// there is (maybe nothing).
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) {
	chat := r.PathValue("chat")
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, fmt.Errorf("%w: after=%q: want a message id", ErrInvalid, v))
			return
		}
		after = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.fail(w, r, fmt.Errorf("%w: wait=%q: want a Go duration such as 30s", ErrInvalid, v))
			return
		}
		wait = min(d, s.opts.MaxWait)
	}
	ctx := r.Context()
	if err := s.localChat(ctx, chat); err != nil {
		s.fail(w, r, err)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	expired := wait == 0
	for {
		changed := s.opts.Local.Wait(ctx)
		msgs, err := s.opts.Admin.Messages(ctx, chat, after)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(msgs) > 0 || expired {
			writeJSON(w, http.StatusOK, Messages{Messages: msgs})
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			expired = true
		case <-s.stopping:
			expired = true
		case <-ctx.Done():
			return
		}
	}
}
