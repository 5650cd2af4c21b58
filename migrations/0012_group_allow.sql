-- Who may wake a group's agent. allow_senders is a JSON array of sender
-- ids ("491701234567@s.whatsapp.net", "1234@lid", "local:bob", "admins");
-- empty: everyone, as before. others says what happens to a message from
-- anyone else: "context" (stored, shown to the agent, wakes nothing) or
-- "drop" (not stored).
ALTER TABLE registered_groups ADD COLUMN allow_senders TEXT NOT NULL DEFAULT '[]';
ALTER TABLE registered_groups ADD COLUMN others TEXT NOT NULL DEFAULT 'context';
-- A message whose sender the group's allow list did not admit when it
-- arrived: context for the agent, never a trigger.
ALTER TABLE messages ADD COLUMN not_allowed INTEGER NOT NULL DEFAULT 0;
