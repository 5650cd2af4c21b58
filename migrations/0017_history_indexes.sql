-- Indexes that keep a message's cost the same however long a chat's history
-- grows. The pending messages of a chat stop at its first media still being
-- fetched after the cursor: that lookup reads the chat's media after the
-- cursor, not every chat's.
CREATE INDEX media_chat ON media (chat, message_id);
-- A reply or reaction in the main chat is looked up among bridged's own
-- notices by the network id it answers (an approval request, a notice).
CREATE INDEX outbox_notice_sent ON outbox (sent_id) WHERE origin = 'notice' AND folder = '';
CREATE INDEX outbox_notice_external ON outbox (external_id) WHERE origin = 'notice' AND folder = '';
-- A chat's messages by time, with the direction: what /metrics counts of
-- today and the dashboard plots of the last hours read, from the index
-- alone, without a chat's older history.
CREATE INDEX messages_chat_sent ON messages (chat, sent_at, is_bot);
-- `bridged why` reads the outbox rows of a span to a chat or from a group,
-- and the approvals a group asked in it; the approvals list and page read
-- the newest requests first.
CREATE INDEX outbox_chat_created ON outbox (chat, created_at);
CREATE INDEX outbox_folder_created ON outbox (folder, created_at) WHERE folder != '';
CREATE INDEX approvals_folder_asked ON approvals (folder, asked_at, id);
CREATE INDEX approvals_asked ON approvals (asked_at, id);
