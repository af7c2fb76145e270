-- Reserve in one statement (ADR 0070): `INSERT INTO queue_processing … SELECT … FROM queues`
-- names the popped row in `src_id`, and this trigger deletes it in the same statement, so the
-- pop and the reservation are one atomic step without a transaction round trip. Rows inserted by
-- the seed leave `src_id` NULL and fire nothing.
ALTER TABLE queue_processing ADD COLUMN src_id INTEGER;
CREATE TRIGGER IF NOT EXISTS switchyard_reserve_pop AFTER INSERT ON queue_processing
WHEN new.src_id IS NOT NULL
BEGIN
    DELETE FROM queues WHERE id = new.src_id;
END;
