-- Who last set each task's prompt: the folder of the group whose agent did
-- (schedule_task, update_task), or '' for the owner. A task whose prompt
-- another group set runs only while that group's profile is full. Tasks
-- from before this column whose group is not main may have been set by
-- main: they are taken as main's, so a main that is not full cannot run
-- them in another group (the owner's `bridged tasks resume` vouches for one).
ALTER TABLE tasks ADD COLUMN prompt_by TEXT NOT NULL DEFAULT '';
UPDATE tasks SET prompt_by = (SELECT folder FROM registered_groups WHERE is_main = 1)
    WHERE EXISTS (SELECT 1 FROM registered_groups WHERE is_main = 1 AND folder != tasks.folder);
