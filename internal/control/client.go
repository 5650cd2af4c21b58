package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// APIError is an error answer of the control API.
type APIError struct {
	Code    int    // HTTP status
	Message string // the server's {"error": …}
	Body    []byte // the whole answer, for errors that carry more
}

func (e *APIError) Error() string { return e.Message }

// Is matches the error classes: 404 ErrNotFound, 409 ErrConflict,
// 400 ErrInvalid, 503 ErrNotRunning.
func (e *APIError) Is(target error) bool {
	switch e.Code {
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusBadRequest:
		return target == ErrInvalid
	case http.StatusServiceUnavailable:
		return target == ErrNotRunning
	}
	return false
}

// Client calls the control API over the daemon's unix socket. Every method
// fails with an error wrapping ErrNotRunning when nothing answers on it.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// do sends a request and decodes a JSON answer into out (nil: none expected).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	return c.send(ctx, method, path, body, ct, out)
}

// send sends a request with body of content type ct (none when "") and
// decodes a JSON answer into out (nil: none expected).
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, ct string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://bridged"+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("%w (no answer on %s)", ErrNotRunning, c.socket)
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var eb errorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		}
		return &APIError{Code: resp.StatusCode, Message: eb.Error, Body: b}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if s, ok := out.(*string); ok {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		*s = string(b)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Metrics returns the Prometheus text of /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var s string
	err := c.do(ctx, http.MethodGet, "/metrics", nil, &s)
	return s, err
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Groups lists the registered groups.
func (c *Client) Groups(ctx context.Context) ([]Group, error) {
	var gs []Group
	err := c.do(ctx, http.MethodGet, "/v1/groups", nil, &gs)
	return gs, err
}

// FindGroups lists the groups name names (MatchGroups; "" names the main
// group), answered alone: a daemon before this asked ignores the question
// and lists every group, which MatchGroups narrows here.
func (c *Client) FindGroups(ctx context.Context, name string) ([]Group, error) {
	var gs []Group
	if err := c.do(ctx, http.MethodGet, "/v1/groups?find="+url.QueryEscape(name), nil, &gs); err != nil {
		return nil, err
	}
	return MatchGroups(gs, name, func(g Group) (string, string, string, bool) { return g.Folder, g.Chat, g.Name, g.IsMain }), nil
}

// AddGroup registers a group.
func (c *Client) AddGroup(ctx context.Context, req GroupAdd) (Group, error) {
	var g Group
	err := c.do(ctx, http.MethodPost, "/v1/groups", req, &g)
	return g, err
}

// RemoveGroup unregisters a group.
func (c *Client) RemoveGroup(ctx context.Context, folder string) error {
	return c.do(ctx, http.MethodDelete, "/v1/groups/"+url.PathEscape(folder), nil, nil)
}

// UpdateGroup changes a group's settings.
func (c *Client) UpdateGroup(ctx context.Context, folder string, p GroupPatch) (Group, error) {
	var g Group
	err := c.do(ctx, http.MethodPatch, "/v1/groups/"+url.PathEscape(folder), p, &g)
	return g, err
}

// EndSession ends a group's Claude session, so that its next turn starts
// a new one, and returns what became of a live container of the group.
func (c *Client) EndSession(ctx context.Context, folder string) (string, error) {
	var out SessionEnded
	err := c.do(ctx, http.MethodDelete, "/v1/groups/"+url.PathEscape(folder)+"/session", nil, &out)
	return out.Applies, err
}

// Chats lists every chat seen.
func (c *Client) Chats(ctx context.Context) ([]Chat, error) {
	var cs []Chat
	err := c.do(ctx, http.MethodGet, "/v1/chats", nil, &cs)
	return cs, err
}

// Tasks lists every task.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	var ts []Task
	err := c.do(ctx, http.MethodGet, "/v1/tasks", nil, &ts)
	return ts, err
}

func (c *Client) taskAction(ctx context.Context, id, action string) (Task, error) {
	var t Task
	err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/"+action, nil, &t)
	return t, err
}

// AddTask schedules a task for a group.
func (c *Client) AddTask(ctx context.Context, req TaskAdd) (Task, error) {
	var t Task
	err := c.do(ctx, http.MethodPost, "/v1/tasks", req, &t)
	return t, err
}

// PauseTask pauses a task.
func (c *Client) PauseTask(ctx context.Context, id string) (Task, error) {
	return c.taskAction(ctx, id, "pause")
}

// ResumeTask resumes a paused task.
func (c *Client) ResumeTask(ctx context.Context, id string) (Task, error) {
	return c.taskAction(ctx, id, "resume")
}

// CancelTask deletes a task; its run log stays.
func (c *Client) CancelTask(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// TaskRuns lists up to limit runs of a task, newest first (0: all).
func (c *Client) TaskRuns(ctx context.Context, id string, limit int) ([]TaskRun, error) {
	var rs []TaskRun
	err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/runs?limit="+strconv.Itoa(limit), nil, &rs)
	return rs, err
}

// PostMessage sends text from sender to a local chat and returns the stored
// message's id. With files (paths on this machine), it reads each and sends
// them with the text (which may then be empty) as one multipart request:
// one message per file, the first captioned with text; the id returned is
// the last message's, whose turn takes them all. The daemon never opens a
// path a client names.
func (c *Client) PostMessage(ctx context.Context, chat, sender, text string, files ...string) (int64, error) {
	return c.Post(ctx, chat, PostMessage{Sender: sender, Text: text}, files...)
}

// Post posts msg to a local chat, as PostMessage does, also as another
// member of the chat (msg.As).
func (c *Client) Post(ctx context.Context, chat string, msg PostMessage, files ...string) (int64, error) {
	path := "/v1/chats/" + url.PathEscape(chat) + "/messages"
	var p Posted
	if len(files) == 0 {
		err := c.do(ctx, http.MethodPost, path, msg, &p)
		return p.ID, err
	}
	fs := make([]*os.File, 0, len(files))
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for _, name := range files {
		f, err := OpenAttachment(name)
		if err != nil {
			return 0, err
		}
		fs = append(fs, f)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeParts(mw, msg, fs))
	}()
	err := c.send(ctx, http.MethodPost, path, pr, mw.FormDataContentType(), &p)
	pr.CloseWithError(errors.New("request done"))
	<-done
	return p.ID, err
}

// OpenAttachment opens the file at path to be sent with a message; anything
// but a regular file is refused.
func OpenAttachment(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	if fi, err := f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("attach: %w", err)
	} else if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("attach %s: not a regular file", path)
	}
	return f, nil
}

// writeParts writes a multipart post: the message, then each file with its
// name and content type (by extension, else sniffed).
func writeParts(mw *multipart.Writer, msg PostMessage, files []*os.File) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="message"`)
	h.Set("Content-Type", "application/json")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := pw.Write(b); err != nil {
		return err
	}
	for _, f := range files {
		name := filepath.Base(f.Name())
		ct := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
		br := bufio.NewReader(f)
		if ct == "" {
			head, _ := br.Peek(512)
			ct = http.DetectContentType(head)
		}
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": name}))
		h.Set("Content-Type", ct)
		pw, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := io.Copy(pw, br); err != nil {
			return fmt.Errorf("attach %s: %w", f.Name(), err)
		}
	}
	return mw.Close()
}

// Messages returns the messages of a local chat after the id after. With
// wait > 0 it long-polls: the answer comes when a message arrives or wait
// (at most 60 s on the server) passes, and may be empty.
func (c *Client) Messages(ctx context.Context, chat string, after int64, wait time.Duration) ([]ChatMessage, error) {
	q := url.Values{}
	q.Set("after", strconv.FormatInt(after, 10))
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var m Messages
	err := c.do(ctx, http.MethodGet, "/v1/chats/"+url.PathEscape(chat)+"/messages?"+q.Encode(), nil, &m)
	return m.Messages, err
}
