package control

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"
)

// Dashboard is the web dashboard the server serves under /dashboard/: its
// pages (every request is the dashboard's to authenticate) and the one-time
// login links `bridged dashboard` prints.
type Dashboard interface {
	http.Handler
	// Login makes a one-time login link.
	Login() (DashboardLogin, error)
}

// DashboardLogin is the answer to POST /v1/dashboard/login: a one-time
// login link. Path is the link on the control socket; URL the same on the
// loopback TCP address when BRIDGED_DASHBOARD sets one ("" otherwise).
type DashboardLogin struct {
	Path    string    `json:"path"`
	URL     string    `json:"url,omitempty"`
	Expires time.Time `json:"expires"`
}

// errNoDashboard answers when the daemon serves no dashboard.
var errNoDashboard = errors.New("this daemon serves no dashboard")

// dashboardHolder keeps the dashboard Options.Dashboard built.
type dashboardHolder struct{ atomic.Pointer[Dashboard] }

// NewDashboard builds the dashboard a Server serves under /dashboard/ from
// the server itself (its status and stories are what the pages show); Listen
// calls it once, before it returns.
type NewDashboard func(*Server) (Dashboard, error)

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	d := s.dash.Load()
	if d == nil {
		writeError(w, http.StatusNotFound, errNoDashboard)
		return
	}
	(*d).ServeHTTP(w, r)
}

func (s *Server) dashboardLogin(w http.ResponseWriter, r *http.Request) {
	d := s.dash.Load()
	if d == nil {
		writeError(w, http.StatusServiceUnavailable, errNoDashboard)
		return
	}
	l, err := (*d).Login()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, l)
}

// DashboardLogin asks the daemon for a one-time dashboard login link.
func (c *Client) DashboardLogin(ctx context.Context) (DashboardLogin, error) {
	var l DashboardLogin
	err := c.do(ctx, http.MethodPost, "/v1/dashboard/login", struct{}{}, &l)
	return l, err
}
