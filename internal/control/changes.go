package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bridged-app/bridged/internal/agentrun"
	"github.com/bridged-app/bridged/internal/channel"
	"github.com/bridged-app/bridged/internal/snapshot"
	"github.com/bridged-app/bridged/internal/store"
)

// ChangeInfo is what one turn (or undo) changed in its group's folder and
// memory, summed up (`bridged changes`).
type ChangeInfo struct {
	ID     int64  `json:"id"`
	Group  string `json:"group"`
	Kind   string `json:"kind"` // turn, task, undo
	Chat   string `json:"chat,omitempty"`
	Upto   int64  `json:"upto,omitempty"` // the newest message the turn had been handed
	Task   string `json:"task,omitempty"`
	Undoes int64  `json:"undoes,omitempty"`
	// Source names who other than the owner wrote the messages the turn
	// took: what it changed came (also) from them.
	Source    string     `json:"source,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"` // nil: still running (or cut off)
	// Line is the summary as `why` shows it: "files changed: +2 −1,
	// memory changed: 3 lines".
	Line          string `json:"line"`
	FilesAdded    int    `json:"files_added"`
	FilesRemoved  int    `json:"files_removed"`
	FilesModified int    `json:"files_modified"`
	MemoryAdded   int    `json:"memory_added"`
	MemoryRemoved int    `json:"memory_removed"`
	Note          string `json:"note,omitempty"`
}

func changeInfo(c store.Change) ChangeInfo {
	ci := ChangeInfo{ID: int64(c.ID), Group: string(c.Folder), Kind: string(c.Kind), Chat: string(c.Chat), Upto: int64(c.Upto),
		Task: string(c.Task), Undoes: int64(c.Undoes), Source: c.Source, StartedAt: c.StartedAt, Line: snapshot.Line(c.Summary),
		FilesAdded: c.FilesAdded, FilesRemoved: c.FilesRemoved, FilesModified: c.FilesModified,
		MemoryAdded: c.MemoryAdded, MemoryRemoved: c.MemoryRemoved, Note: c.Note}
	if !c.Open() {
		t := c.EndedAt
		ci.EndedAt = &t
	} else {
		ci.Line = "still running: recorded when it ends"
	}
	return ci
}

// ChangeDiff is what one change changed, file by file (`bridged diff`).
type ChangeDiff struct {
	Change ChangeInfo          `json:"change"`
	Files  []snapshot.FileDiff `json:"files"`
}

// UndoRequest is POST /v1/groups/{folder}/changes/{id}/undo's body.
type UndoRequest struct {
	Force bool     `json:"force,omitempty"`
	Keep  bool     `json:"keep,omitempty"`
	Only  []string `json:"only,omitempty"`
}

// UndoReply is what an undo did, or, with Error set (HTTP 409), why it
// did nothing: the conflicts to choose about.
type UndoReply struct {
	snapshot.UndoResult
	Error string `json:"error,omitempty"`
}

// changesLimit caps the changes one listing returns.
const changesLimit = 200

// Changes lists folder's turns since `since` that changed something (and
// those still running), newest first.
func (a *Admin) Changes(ctx context.Context, folder string, since time.Time) ([]ChangeInfo, error) {
	if _, err := a.DB.Groups.ByFolder(ctx, store.Folder(folder)); err != nil {
		return nil, err
	}
	cs, err := a.DB.Changes.List(ctx, store.Folder(folder), since, true, changesLimit)
	if err != nil {
		return nil, err
	}
	out := make([]ChangeInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, changeInfo(c))
	}
	return out, nil
}

// Diff tells what change id of folder changed, file by file.
func (a *Admin) Diff(ctx context.Context, folder string, id int64) (ChangeDiff, error) {
	if a.Snapshots == nil {
		return ChangeDiff{}, fmt.Errorf("no snapshots are kept: %w", store.ErrNotFound)
	}
	r, err := a.Snapshots.Diff(ctx, store.ChangeID(id))
	switch {
	case errors.Is(err, snapshot.ErrOpen):
		return ChangeDiff{}, fmt.Errorf("%w: turn %d has not ended yet", ErrConflict, id)
	case err != nil:
		return ChangeDiff{}, err
	case string(r.Change.Folder) != folder:
		return ChangeDiff{}, fmt.Errorf("turn %d of group %s: %w", id, folder, store.ErrNotFound)
	}
	return ChangeDiff{Change: changeInfo(r.Change), Files: r.Files}, nil
}

// Undo puts what change id of folder changed back (snapshot.Service.Undo),
// refused while the group's agent works on a turn (Admin.Idle).
func (a *Admin) Undo(ctx context.Context, folder string, id int64, req UndoRequest) (UndoReply, error) {
	if a.Snapshots == nil {
		return UndoReply{}, fmt.Errorf("no snapshots are kept: %w", store.ErrNotFound)
	}
	if _, err := a.DB.Groups.ByFolder(ctx, store.Folder(folder)); err != nil {
		return UndoReply{}, err
	}
	var res snapshot.UndoResult
	undo := func() error {
		var err error
		res, err = a.Snapshots.Undo(ctx, store.Folder(folder), store.ChangeID(id), snapshot.UndoOptions{Force: req.Force, Keep: req.Keep, Only: req.Only})
		return err
	}
	var err error
	if a.Idle != nil {
		err = a.Idle(store.Folder(folder), undo)
	} else {
		err = undo()
	}
	switch {
	case errors.Is(err, snapshot.ErrOtherGroup):
		return UndoReply{}, fmt.Errorf("turn %d of group %s: %w", id, folder, store.ErrNotFound)
	case errors.Is(err, snapshot.ErrOpen):
		return UndoReply{}, fmt.Errorf("%w: turn %d has not ended yet", ErrConflict, id)
	case errors.Is(err, snapshot.ErrConflict):
		return UndoReply{UndoResult: res, Error: err.Error()}, fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, ErrTurnRunning):
		return UndoReply{}, fmt.Errorf("undo refused: %w", err)
	case err != nil:
		return UndoReply{}, err
	}
	return UndoReply{UndoResult: res}, nil
}

// ErrTurnRunning refuses an undo while the group's agent works on a turn
// (the Admin's Idle returns it).
var ErrTurnRunning = agentrun.ErrTurnRunning

func (s *Server) listChanges(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			s.fail(w, r, invalid("since %q: want an RFC 3339 time", v))
			return
		}
		since = t
	}
	out, err := s.opts.Admin.Changes(r.Context(), r.PathValue("folder"), since)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func changeID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid("turn %q: want a turn number", r.PathValue("id"))
	}
	return id, nil
}

func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) {
	id, err := changeID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.opts.Admin.Diff(r.Context(), r.PathValue("folder"), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postUndo(w http.ResponseWriter, r *http.Request) {
	id, err := changeID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req UndoRequest
	if r.ContentLength != 0 {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			s.fail(w, r, invalid("undo: %v", err))
			return
		}
	}
	out, err := s.opts.Admin.Undo(r.Context(), r.PathValue("folder"), id, req)
	switch {
	case out.Error != "":
		writeJSON(w, http.StatusConflict, out)
	case errors.Is(err, ErrTurnRunning):
		writeError(w, http.StatusConflict, err)
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

func changesPath(folder string) string { return "/v1/groups/" + url.PathEscape(folder) + "/changes" }

// Changes asks the daemon for folder's changes (see Admin.Changes).
func (c *Client) Changes(ctx context.Context, folder string, since time.Time) ([]ChangeInfo, error) {
	p := changesPath(folder)
	if !since.IsZero() {
		p += "?since=" + url.QueryEscape(since.Format(time.RFC3339))
	}
	var out []ChangeInfo
	return out, c.do(ctx, http.MethodGet, p, nil, &out)
}

// Diff asks the daemon what change id of folder changed.
func (c *Client) Diff(ctx context.Context, folder string, id int64) (ChangeDiff, error) {
	var out ChangeDiff
	return out, c.do(ctx, http.MethodGet, changesPath(folder)+"/"+strconv.FormatInt(id, 10), nil, &out)
}

// Undo asks the daemon to undo change id of folder. A conflict returns
// the reply (its conflicts) with an error that is ErrConflict.
func (c *Client) Undo(ctx context.Context, folder string, id int64, req UndoRequest) (UndoReply, error) {
	var out UndoReply
	err := c.do(ctx, http.MethodPost, changesPath(folder)+"/"+strconv.FormatInt(id, 10)+"/undo", req, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusConflict && ae.Body != nil {
		_ = json.Unmarshal(ae.Body, &out)
	}
	return out, err
}

// ChatUndo takes the owner's `/undo GROUP TURN [force|keep]` in the main
// chat (ok true: it is taken out before storage) and returns the reply to
// post there: what the undo did, the conflicts to choose about, or why it
// was refused. Anyone else's `/undo` is answered that only the owner may;
// a message anywhere but the main chat is not taken.
func (a *Admin) ChatUndo(ctx context.Context, m channel.Message) (reply string, ok bool) {
	if m.Reaction != nil || m.IsBot {
		return "", false
	}
	f := strings.Fields(m.OwnText())
	if len(f) == 0 || f[0] != "/undo" {
		return "", false
	}
	main, err := a.DB.Groups.Main(ctx)
	if err != nil || string(main.Chat) != m.Chat {
		return "", false
	}
	if !m.FromMe {
		return "Only the owner may undo what a turn changed.", true
	}
	usage := "Usage: /undo GROUP TURN [force|keep] (the turn as `bridged changes GROUP` lists it)."
	if len(f) < 3 || len(f) > 4 {
		return usage, true
	}
	id, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || id <= 0 {
		return usage, true
	}
	var req UndoRequest
	if len(f) == 4 {
		switch f[3] {
		case "force":
			req.Force = true
		case "keep":
			req.Keep = true
		default:
			return usage, true
		}
	}
	r, err := a.Undo(ctx, f[1], id, req)
	var b strings.Builder
	for _, c := range r.Conflicts {
		fmt.Fprintf(&b, "\n%s changed again since the turn (the turn left %s, now %s)", c.Path, c.TurnLeft, c.Now)
		if c.Overwrite {
			b.WriteString(": overwritten")
		}
	}
	switch {
	case errors.Is(err, ErrConflict) && r.Error != "":
		return fmt.Sprintf("Undo of turn %d of %s not done: %s.%s\nReply /undo %s %d force to overwrite them, or /undo %s %d keep to undo the rest.",
			id, f[1], r.Error, b.String(), f[1], id, f[1], id), true
	case err != nil:
		return fmt.Sprintf("Undo of turn %d of %s not done: %v.", id, f[1], err), true
	case r.Change == 0:
		return fmt.Sprintf("Nothing to undo: what turn %d of %s changed is as it was before it.", id, f[1]), true
	}
	return fmt.Sprintf("Undone: %s of %s put back as before turn %d (recorded as turn %d: /undo %s %d takes it back).%s",
		strings.Join(r.Restored, ", "), f[1], id, r.Change, f[1], r.Change, b.String()), true
}
