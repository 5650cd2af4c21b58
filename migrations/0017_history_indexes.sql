-- Indexes that keep a message's cost the same however long a chat's history
-- grows. The pending messages of a chat stop at its first media still being
-- fetched after the cursor: that lookup reads the chat's media after the
-- cursor, not every chat's.
CREATE INDEX media_chat ON media (chat, message_id);
-- A reply or reaction in the main chat is looked up among bridged's own
-- notices by the network id it answers (an approval request, a notice).
CREATE INDEX outbox_notice_sent ON outbox (sent_id) WHERE origin = 'notice' AND folder = '';
CREATE INDEX outbox_notice_external ON outbox (external_id) WHERE origin = 'notice' AND folder = '';
