package dashboard

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/bridged-app/bridged/internal/control"
)

// diffData is the diff page: what one turn changed, and what an undo of
// it just did (or why it did nothing).
type diffData struct {
	control.ChangeDiff
	Undo    *control.UndoReply
	UndoErr string
	CSRF    string
}

func (d *Dashboard) changeOf(w http.ResponseWriter, r *http.Request) (string, int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		d.fail(w, r, fmt.Errorf("%w: turn %q: want a turn number", control.ErrInvalid, r.PathValue("id")))
		return "", 0, false
	}
	return r.PathValue("folder"), id, true
}

// diff shows what one turn changed in its group's files and memory, file
// by file, with the forms that undo it.
func (d *Dashboard) diff(w http.ResponseWriter, r *http.Request) {
	folder, id, ok := d.changeOf(w, r)
	if !ok {
		return
	}
	cd, err := d.opts.Admin.Diff(r.Context(), folder, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := diffData{ChangeDiff: cd}
	if s := sessionOf(r); s != nil {
		data.CSRF = s.csrf
	}
	d.render(w, r, "diff", fmt.Sprintf("turn %d of %s", id, folder), "", data)
}

// undo undoes one turn (undo=plain, keep or force) and shows its diff
// page with what the undo did, or the conflicts to choose about.
func (d *Dashboard) undo(w http.ResponseWriter, r *http.Request) {
	folder, id, ok := d.changeOf(w, r)
	if !ok {
		return
	}
	var req control.UndoRequest
	switch v := r.PostFormValue("undo"); v {
	case "plain":
	case "keep":
		req.Keep = true
	case "force":
		req.Force = true
	default:
		d.fail(w, r, fmt.Errorf("%w: undo %q: want plain, keep or force", control.ErrInvalid, v))
		return
	}
	res, err := d.opts.Admin.Undo(r.Context(), folder, id, req)
	data := diffData{Undo: &res}
	if err != nil {
		data.UndoErr = err.Error()
	} else {
		d.log.Info().Str("group", folder).Int64("turn", id).Int64("undo", int64(res.Change)).Msg("turn undone on the dashboard")
	}
	cd, derr := d.opts.Admin.Diff(r.Context(), folder, id)
	if derr != nil {
		d.fail(w, r, derr)
		return
	}
	data.ChangeDiff = cd
	if s := sessionOf(r); s != nil {
		data.CSRF = s.csrf
	}
	d.render(w, r, "diff", fmt.Sprintf("turn %d of %s", id, folder), "", data)
}
