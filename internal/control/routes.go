package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/schedule"
	"github.com/bridged-app/bridged/internal/store"
)

// maxBody caps request bodies.
const maxBody = 1 << 20

// Handler is the API's HTTP handler (exported for tests).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/config", s.getConfig)
	mux.HandleFunc("GET /v1/groups", s.listGroups)
	mux.HandleFunc("POST /v1/groups", s.addGroup)
	mux.HandleFunc("DELETE /v1/groups/{folder}", s.removeGroup)
	mux.HandleFunc("PATCH /v1/groups/{folder}", s.updateGroup)
	mux.HandleFunc("DELETE /v1/groups/{folder}/session", s.endSession)
	mux.HandleFunc("GET /v1/groups/{folder}/changes", s.listChanges)
	mux.HandleFunc("GET /v1/groups/{folder}/changes/{id}", s.getDiff)
	mux.HandleFunc("POST /v1/groups/{folder}/changes/{id}/undo", s.postUndo)
	mux.HandleFunc("GET /v1/chats", s.listChats)
	mux.HandleFunc("GET /v1/tasks", s.listTasks)
	mux.HandleFunc("POST /v1/tasks", s.addTask)
	mux.HandleFunc("POST /v1/tasks/{id}/{action}", s.taskAction)
	mux.HandleFunc("GET /v1/tasks/{id}/runs", s.taskRuns)
	mux.HandleFunc("POST /v1/chats/{chat}/messages", s.postMessage)
	mux.HandleFunc("GET /v1/chats/{chat}/messages", s.getMessages)
	mux.HandleFunc("GET /v1/chats/{chat}/turn", s.getTurn)
	mux.HandleFunc("GET /v1/messages/{id}/story", s.getStory)
	mux.HandleFunc("GET /v1/approvals", s.listApprovals)
	mux.HandleFunc("GET /v1/approvals/rules", s.listApprovalRules)
	mux.HandleFunc("DELETE /v1/approvals/rules/{id}", s.forgetApprovalRule)
	mux.HandleFunc("POST /v1/approvals/{id}/{action}", s.decideApproval)
	mux.HandleFunc("POST /v1/dashboard/login", s.dashboardLogin)
	mux.HandleFunc("/dashboard/", s.dashboard)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return s.middleware(mux)
}

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer (the
// dashboard's server-sent events flush through it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error().Str("method", r.Method).Str("path", r.URL.Path).Interface("panic", p).Msg("control handler panicked")
				writeError(rec, http.StatusInternalServerError, errors.New("internal error"))
			}
			s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.code).
				Dur("duration", time.Since(start)).Msg("control request")
		}()
		next.ServeHTTP(rec, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorBody{Error: err.Error()})
}

// codeOf maps an error class to an HTTP status.
func codeOf(err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrMainExists), errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrInvalid), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrInvalidFolder),
		errors.Is(err, schedule.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotRunning):
		return http.StatusServiceUnavailable
	case errors.Is(err, store.ErrNotAllowed):
		return http.StatusForbidden
	case errors.Is(err, local.ErrBadSender):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := codeOf(err)
	if code == http.StatusInternalServerError {
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("control request failed")
	}
	writeError(w, code, err)
}

// decode reads a JSON body into v, rejecting unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: more than one JSON value", ErrInvalid)
	}
	return nil
}
