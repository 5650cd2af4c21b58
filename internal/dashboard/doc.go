// Package dashboard is bridged's web dashboard: server-rendered pages
// (html/template, assets embedded, no script but the live conversation's)
// over what the control API reports: the channels, containers, queue and
// costs; each group's settings, conversation (live, over server-sent
// events), container, tasks and costs; tasks and their runs; approvals; a
// message's story; small plots drawn as inline SVG.
//
// The daemon serves it on the control socket under /dashboard/ and, when
// BRIDGED_DASHBOARD names a loopback address, on that TCP port (the
// dashboard's routes only, never the control API). Every route but the
// login link needs a session: `bridged dashboard` asks the daemon for a
// one-time login link (valid once, for ten minutes) that sets the session
// cookie (HttpOnly, SameSite=Strict, kept in memory: a restart logs out).
// Every change is a POST carrying the session's CSRF token, from a page of
// the dashboard's own origin; no route sends CORS headers. Text a chat
// member wrote is escaped (html/template's contextual escaping; the live
// conversation sets textContent). No credential is ever shown.
package dashboard
