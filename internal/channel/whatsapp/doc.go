// Package whatsapp is bridged's WhatsApp channel, built on go.mau.fi/whatsmeow.
//
// The device store (keys, sessions, the LID map) lives in its own SQLite file,
// store/whatsapp.db, opened with modernc.org/sqlite, foreign keys on and one
// connection. Deleting the file logs the daemon out.
//
// Inbound: the client delivers to a Sink, a small interface defined here and
// given in Options at construction (New refuses to build a client without
// one). Every method takes the
// context of the event it serves; the client's own context, cancelled by
// Close, bounds them, and the sink adds no timeouts of its own. whatsmeow
// runs with synchronous acks and its decrypted-event buffer, and the event
// handler reports success only after Sink.Inbound returned (the message is
// committed), so a crash before the commit makes WhatsApp redeliver. Each
// message's chat is looked up once, through Sink.Lookup, before anything of
// the message is built, and Sink.Inbound takes what Lookup found (the ingest
// looks no more; a direct chat not registered by its number is looked up
// a second time by its LID). Each
// message writes its chat once: a message of a registered chat goes to
// Sink.Inbound, which stores it and its chat's metadata in one commit (a
// reaction goes there too, as a message with Reaction set that is never a
// prompt: see owner.go); any other message (an unregistered chat, a revoke,
// a poll vote) records only the chat,
// through Sink.ChatSeen, which also serves joined and renamed groups and the
// group sync. Text is built only for registered chats. Text, captions and the ephemeral,
// view-once, edited and document-with-caption wrappers become text; other
// content becomes a short placeholder such as "[voice note]". A caption stays
// first, so "@Andy what is this?" on a photo still starts with the trigger,
// and the placeholder follows on its own line. Images, documents and voice
// notes in registered chats are not downloaded while the event is handled:
// the message is stored with a reference to its media (channel.Media, the
// media message itself) and a "[image: downloading]" placeholder, then
// acknowledged; the media pool (internal/media) downloads it later through
// Client.Fetch into <group folder>/inbox/ and the placeholder then names the
// saved file ("[image: inbox/2026-11-22-3EB0….jpg]"). Reactions, revokes,
// poll votes and protocol messages never become prompts.
//
// Identities: a person or a direct chat seen both as a LID (…@lid) and as a
// phone number (…@s.whatsapp.net) is stored in the phone-number form when
// whatsmeow's LID map knows it (the LID otherwise). Group chats keep their
// …@g.us id. A mention of the bot's own number or LID sets
// channel.Message.Mentioned and is rewritten to "@<assistant name>".
//
// Outbound: the outbox's id is reused on every retry (split parts get ids
// derived from it by hashing), long text is split below MaxMessageRunes at
// paragraph, then sentence, then word boundaries, and with a shared number
// every message is prefixed "<Name>: " once.
//
// Connection: the client owns reconnection (whatsmeow's own loop is off): a
// lost connection is retried with an exponential backoff capped at
// MaxReconnectDelay, a temporary ban is retried when it expires, a 405
// "client outdated" is retried once if a newer web version is published, and
// logged-out or replaced sessions stop and say what the owner should do.
// Each state is logged once and exposed by Status and StateMetric.
//
// Health (health.go, restrict.go): Status also carries a one-word health
// and the conditions that limit a live connection: a reachout timelock
// (messages to direct chats that never wrote are refused until it ends), a
// suspended group (its sends are refused, its agent is told by a stored
// message), a flapping connection (3 drops within 10 minutes, until an hour
// without one), the app state out of sync (appstate.go), the phone offline
// for 12 days (liveness.go). A send WhatsApp refuses with 463 starts the
// timelock too. The timelock and suspensions are kept in the device
// store's bridged_kv table across restarts; the alerts package tells the
// owner each condition once. History sync (historysync.go, backlog.go) is
// downloaded by bridged, bounded, and stored as backlog that never starts
// a turn. Pairing (login.go, passkey.go) handles
// WhatsApp's passkey step and bounds connecting and pairing by 30 s each.
//
// Structure: Client is a thin composition (client.go) that implements
// channel.Channel and dispatches whatsmeow's events (events.go) to parts
// that each own their state and lock: connection (connection.go), inbound
// (inbound.go, owner.go), identities (lid.go), sender (send.go), presence
// (presence.go), groupSync (groups.go, admins.go), history (historysync.go,
// backlog.go), restrictions (restrict.go, health.go), appState
// (appstate.go) and liveness (liveness.go). Each embeds one core (core.go):
// whatsmeow, the sink, the options, the clock, bridged_kv and the client's
// lifetime. No type of the package has more than 20 methods
// (TestPackageMethodCounts at the repository's root).
package whatsapp
