-- switchyard's extra state, in columns and tables the seed never reads (ADR 0071). Added columns
-- have defaults, so the seed's INSERTs (which name their columns) keep working.

-- Claim tokens: a lapsed claim's holder cannot free the next claim (fleet flaw P5/claim release).
ALTER TABLE pool_claims ADD COLUMN token TEXT;

-- Delivery attempts travel with a task through every table it visits (fleet flaw Q8), and the
-- tier travels with retries (Q7). `queue_processing.task_id` holds the delivery receipt (Q5).
ALTER TABLE queues ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_processing ADD COLUMN tier TEXT NOT NULL DEFAULT 'normal';
ALTER TABLE queue_processing ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_scheduled ADD COLUMN tier TEXT NOT NULL DEFAULT 'normal';
ALTER TABLE queue_scheduled ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS switchyard_queue_processing_deadline ON queue_processing (name, deadline);

-- The config generation a worker reports having applied (the seed threw it away).
ALTER TABLE workers ADD COLUMN applied_gen INTEGER;

-- Lock fencing numbers (fleet flaw R4): rise with every grant, survive release.
CREATE TABLE IF NOT EXISTS switchyard_lock_fences (
    name TEXT PRIMARY KEY,
    fence INTEGER NOT NULL
);

-- Generations outlive workers (fleet flaw W3). Triggers keep this true even when the seed's own
-- code deletes and re-inserts a worker row.
CREATE TABLE IF NOT EXISTS switchyard_worker_gens (
    automation_type TEXT NOT NULL,
    worker_id TEXT NOT NULL,
    config_gen INTEGER NOT NULL,
    PRIMARY KEY (automation_type, worker_id)
);
CREATE TRIGGER IF NOT EXISTS switchyard_workers_keep_gen AFTER DELETE ON workers
BEGIN
    INSERT INTO switchyard_worker_gens (automation_type, worker_id, config_gen)
    VALUES (old.automation_type, old.worker_id, COALESCE(old.config_gen, 0))
    ON CONFLICT (automation_type, worker_id)
    DO UPDATE SET config_gen = MAX(config_gen, excluded.config_gen);
END;
CREATE TRIGGER IF NOT EXISTS switchyard_workers_bump_gen AFTER INSERT ON workers
WHEN EXISTS (
    SELECT 1 FROM switchyard_worker_gens g
    WHERE g.automation_type = new.automation_type AND g.worker_id = new.worker_id
      AND g.config_gen >= COALESCE(new.config_gen, 0)
)
BEGIN
    UPDATE workers SET config_gen = (
        SELECT g.config_gen + 1 FROM switchyard_worker_gens g
        WHERE g.automation_type = new.automation_type AND g.worker_id = new.worker_id
    )
    WHERE automation_type = new.automation_type AND worker_id = new.worker_id;
END;

-- Identical stream envelopes are stored once (T3); find them without scanning the stream.
CREATE INDEX IF NOT EXISTS switchyard_streams_name_body ON streams (name, body);
