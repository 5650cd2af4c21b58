// Package control is bridged's control API: HTTP on the unix socket
// <home>/bridged.sock (mode 0600, owner only), and the Client the command line
// uses to reach it.
//
// Endpoints (DESIGN §12):
//
//	GET    /healthz
//	GET    /metrics                          Prometheus text
//	GET    /v1/status                        Status
//	GET    /v1/groups                        []Group
//	POST   /v1/groups                        GroupAdd → Group (201)
//	PATCH  /v1/groups/{folder}               GroupPatch → Group
//	DELETE /v1/groups/{folder}               204
//	DELETE /v1/groups/{folder}/session       SessionEnded (the next turn starts a new session)
//	GET    /v1/chats                         []Chat (every chat seen, for `groups list --available`)
//	GET    /v1/tasks                         []Task
//	POST   /v1/tasks/{id}/pause|resume       Task
//	POST   /v1/tasks/{id}/cancel             204
//	GET    /v1/tasks/{id}/runs?limit=N       []TaskRun
//	POST   /v1/chats/{chat}/messages         {"sender","text"} → {"id":N,"ids":[N]} (201)
//	                                         or multipart/form-data: "message" and "file" parts
//	GET    /v1/chats/{chat}/messages?after=ID&wait=30s
//	                                         {"messages":[{"id","direction","sender","text","time"}]}
//	GET    /v1/chats/{chat}/turn?after=ID&since=SEQ&wait=30s&approvals=IDS
//	                                         Turn: {"state","seq","upto","error","attempt","attempts","replies":[…]}
//	GET    /v1/approvals?open=1&limit=N      []Approval (newest first)
//	POST   /v1/approvals/{id}/approve|deny   {"always":bool} → Approval (409: settled before)
//	GET    /v1/approvals/rules               []ApprovalRule
//	DELETE /v1/approvals/rules/{id}          204
//	GET    /v1/messages/{id}/story?chat=CHAT Story
//	POST   /v1/dashboard/login               DashboardLogin (201): a one-time dashboard login link
//	*      /dashboard/…                      the web dashboard (Options.Dashboard), behind its own login
//
// Errors are {"error":"…"} with 400 (invalid), 404 (not found), 409 (taken),
// 413 (a file too large), 415 (multipart other than form data),
// 503 (not available) or 500. The chat endpoints serve registered local chats
// only ("local:<name>"). The long-poll waits on the local channel's
// notification (no polling loop) for at most 60 s and answers early, with
// whatever there is, when the daemon stops.
//
// A message may carry files: the post is then multipart/form-data, with a
// part "message" (the PostMessage JSON; the text may be empty) and up to
// MaxFiles parts "file" (a file name and Content-Type). Each file is
// streamed into the uploads spool (Options.Uploads, at most
// Options.MaxUpload bytes: more is 413 and nothing is posted) and posted as
// a message of its own whose media (source "upload") the media worker
// copies into the group's inbox/; the first is captioned with the text. The
// answer's id is the last message's, whose turn takes them all. The kind is
// the part's Content-Type, else the extension's: an image, audio (a voice
// note, transcribed) or a document. Files travel in the request and never
// as a path: the daemon never opens a file a client names, so a client
// attaches only what it can read itself, whichever user the daemon runs as.
// Client.PostMessage reads the files it is given and streams them.
//
// The turn endpoint is how `bridged chat -m` knows the agent is done: it
// answers when the turn that took message ID ends (state "done": answered;
// "failed": failed and retried, so another end follows — ask again with
// since=<its seq>; "gave_up": failed for good), once every message bridged
// committed for the chat is stored in it, with the assistant's messages after
// ID as replies (a progress message sent during the turn included). When the
// wait passes first the state is "running". A message that does not start a
// turn now is answered at once, its kind in the state ("not_triggered",
// "budget_paused", "queued") and one line for a person in reason. A caller
// that passes approvals=
// (the ids of the approvals it was told of) is also answered as soon as the
// open approvals of the chat's group differ from those ("awaiting_approval"
// while some are open), each answer listing them.
//
// Group and task changes go through Admin, which the command line also uses
// directly on the database when the daemon is not running, so both paths
// behave the same; the server then tells the IPC host (GroupSyncer) and the
// scheduler (Waker). Admin applies the rules of internal/rules (chat ids,
// folders, triggers, task states), which the agents' tools apply too. A
// GroupPatch's extra_mounts replace the group's extra mounts ([] clears
// them) once Admin.CheckMounts, the mount allowlist, accepts them; its
// refusal is the 400's text.
//
// Listen refuses to start when another daemon answers on the socket, and
// replaces a socket file a dead daemon left behind. The socket is created
// under a temporary name, restricted to 0600 and renamed into place, so it is
// never reachable by others, and Run removes it on shutdown.
package control
