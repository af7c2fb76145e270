-- A finished task's id can be submitted again (ADR 0390): the two submit triggers of
-- 20700005_fleet_tasks.sql, recreated with a first step that removes a `completed`, `failed` or
-- `cancelled` record of the same id (its removal trigger keeps the bucket counts right). A live
-- or dead record is left, and the record's insert fails the unique constraint as before:
-- `AlreadyExists`, and the whole statement is undone. The step runs first so that
-- `last_insert_rowid()` is still the row the task was put in when the record is written.

DROP TRIGGER IF EXISTS switchyard_task_submit_row;
CREATE TRIGGER switchyard_task_submit_row INSTEAD OF INSERT ON switchyard_task_submit
BEGIN
    DELETE FROM switchyard_tasks
    WHERE name = new.name AND task_id = new.task_id
      AND state IN ('completed', 'failed', 'cancelled');
    INSERT INTO queues (name, tier, body, attempts)
    SELECT new.name, new.tier, new.body, 0 WHERE new.at IS NULL AND new.delay IS NULL;
    INSERT INTO queue_scheduled (name, available_at, body, tier, attempts)
    SELECT new.name,
           COALESCE(new.at, ((julianday('now') - 2440587.5) * 86400.0) + new.delay),
           new.body, new.tier, 0
    WHERE new.at IS NOT NULL OR new.delay IS NOT NULL;
    INSERT INTO switchyard_tasks (name, task_id, state, tier, max_attempts, submitted_at,
                                  touched_at, row_id, last_error)
    SELECT new.name, new.task_id,
           CASE WHEN new.at IS NULL AND new.delay IS NULL THEN 'waiting' ELSE 'scheduled' END,
           new.tier, new.max_attempts, ((julianday('now') - 2440587.5) * 86400.0),
           ((julianday('now') - 2440587.5) * 86400.0), last_insert_rowid(), new.last_error
    WHERE new.task_id IS NOT NULL;
END;

DROP TRIGGER IF EXISTS switchyard_task_push_row;
CREATE TRIGGER switchyard_task_push_row INSTEAD OF INSERT ON switchyard_task_push
BEGIN
    DELETE FROM switchyard_tasks
    WHERE name = new.name AND task_id = new.task_id
      AND state IN ('completed', 'failed', 'cancelled');
    INSERT INTO queues (name, tier, body, attempts) VALUES (new.name, new.tier, new.body, 0);
    INSERT INTO switchyard_tasks (name, task_id, state, tier, max_attempts, submitted_at,
                                  touched_at, row_id, last_error)
    SELECT new.name, new.task_id, 'waiting', new.tier, new.max_attempts,
           ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0),
           last_insert_rowid(), new.last_error
    WHERE new.task_id IS NOT NULL;
END;
