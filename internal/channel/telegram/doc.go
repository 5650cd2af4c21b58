// Package telegram is bridged's Telegram channel: a bot, reached through
// the Bot API with github.com/go-telegram/bot's methods and models.
//
// Identity: a bot token (BotFather's), read from the daemon's env file or
// stored by `bridged login telegram` (Login checks it with getMe and keeps
// it 0600 under the home). Chats are "tg:<chat id>" (negative for groups
// and supergroups), senders "tg:<user id>". The owner is the Telegram user
// id the owner sets (Options.Owner): their messages are FromMe, and only
// theirs answer approvals. A bot never receives its own messages; one that
// comes anyway (a bot's id as sender) is IsBot.
//
// Inbound: bridged owns the getUpdates loop (poll.go). The library's own
// poller confirms an update to Telegram (the next offset) before its handler
// finished, so a crash would lose it; here each update is handed to the
// Sink, which commits what it carries together with the channel's new
// offset in one SQLite transaction (store.PollAck), and only then is the
// next getUpdates sent, from the committed offset. A crash anywhere before
// the commit has Telegram send the update again; after it, the offset is
// past it. An update id already committed (a duplicate in one answer, a
// redelivery) stores nothing (store.ErrExists). 409 (another poller or a
// webhook), 429 (retry_after), 5xx and timeouts back off and poll again;
// 401 stops polling and reports the token revoked.
//
// Mentions (inbound.go): the bot is mentioned by a `mention` entity
// (@botname), a `text_mention` of its user, a `text_link` to
// tg://user?id=<bot id>, a `/command@botname`, or a reply to one of its
// messages; any of them sets channel.Message.Mentioned, and an @botname is
// rewritten to the assistant's trigger. Inline-keyboard buttons under an
// approval request (a notice of bridged's own) answer it: a button's
// callback becomes a 👍/👎 reaction to the request, FromMe only when the
// owner's id pressed it, so nobody else's press counts.
//
// Outbound (send.go): plain text, no parse_mode, so no agent text can
// break the markup; split below MaxMessageUnits (Telegram's 4,096) at
// paragraph, line, then word boundaries; 429's retry_after is waited out;
// 403 (the bot was removed or blocked) and 401 (the token revoked) are
// permanent and shown to the owner once, as a condition and as the state.
// sendMessage has no idempotency key and a bot cannot list what it sent: a
// send whose request was written but whose answer never came is ambiguous,
// returned as channel.ErrAmbiguous (permanent: the outbox records it and
// `bridged why` shows it), never retried. Files: photos, documents, voice
// notes and audio are fetched by the media pool through Client.Fetch
// (media.go); the agent's files go as photos or documents.
//
// Structure: Client is its core (telegram.go: the state, its lock, the
// health) and the parts that view it: the poller (poll.go, inbound.go),
// the sender and the typist (send.go). No type has more than 20 methods
// (TestPackageMethodCounts at the repository's root).
package telegram
