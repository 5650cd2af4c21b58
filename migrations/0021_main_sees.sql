-- Which other groups' folders the main group's agent sees, read-only, under
-- /workspace/groups: 'all' (every group's folder: the whole groups/
-- directory), 'none', or a JSON array of folders. A new main group sees
-- none; the main group of a home made before this keeps seeing all, as it
-- did, and the owner is told once how to narrow it.
ALTER TABLE registered_groups ADD COLUMN sees TEXT NOT NULL DEFAULT 'none';
UPDATE registered_groups SET sees = 'all' WHERE is_main = 1;
INSERT INTO pending_notices (name)
    SELECT 'main_sees' WHERE EXISTS (SELECT 1 FROM registered_groups WHERE is_main = 1)
        AND EXISTS (SELECT 1 FROM registered_groups WHERE is_main = 0);
