// Package outbox sends the daemon's committed messages through the
// channels, and shows the typing indicator.
//
// # Sending
//
// Every message is committed to the outbox (store.EnqueueOutbox) before it
// is sent; whoever commits one calls Sender.Wake. The sender sends each
// chat's pending rows in order (chats in parallel) through the channel that
// owns the chat, with the row's external id so a retried send is
// idempotent. Transient errors are retried with backoff, doubling from
// Config.Backoff up to two minutes, and a chat's later rows wait for its
// earlier ones; a channel that is reconnecting is waited for without using
// up attempts. Errors wrapping channel.ErrPermanent, or eight failed
// attempts, mark the row failed, and a row for a chat no channel owns fails
// at once. Rows left pending by an earlier run are sent when Run starts.
// A row that was sent but could not be marked sent stays pending and goes
// again under the same external id. Config.OnSent is called after each row
// is marked sent. A chat's send that panics (a channel's bug) is logged and
// the chat is looked at again two seconds later, never in a tight loop, while
// the other chats go on.
//
// A row may carry a file: a copy in the home's spool under
// home.SpoolKey(row id, external id), kept there in the transaction that
// committed the row. The sender hands it to the channel with the row's text
// as channel.Outgoing.Attachment, and gives such a send a second more per
// 128 KiB of the file. Once the row is marked sent (or failed for good) the
// copy is removed; the row keeps the file's name and size. A crash between
// the mark and the removal leaves a copy whose row is no longer pending:
// the retention sweep removes it, and the row is never sent again.
//
// Flush waits until nothing can be sent now (every row sent, failed, or
// waiting for a retry or a channel), so a stopping daemon sends what its
// runs committed before it exits.
//
// # Typing
//
// SetTyping queues a typing indicator change for a chat and never blocks;
// Run applies the changes in order through the chat's channel, best effort
// (errors are logged at debug level; a full queue drops the change).
//
// The package depends on internal/store, internal/channel and
// internal/home only.
package outbox
