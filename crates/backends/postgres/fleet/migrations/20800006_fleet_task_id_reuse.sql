-- A finished task's id can be submitted again (ADR 0390). The unique index `fleet_tasks_task_id`
-- still refuses a second row with a known id; a write it refuses calls the function below and,
-- when it removed something, runs once more. Writes that take no known id pay nothing for it.

-- fleet_free_task_ids(names, ids) -> how many records it removed
-- Removes the `completed`, `failed` and `cancelled` records of (names[i], ids[i]) as retention
-- would, keeping the queues' bucket counts right. Live and dead records are left: their ids stay
-- taken. A NULL id matches nothing.
CREATE OR REPLACE FUNCTION fleet_free_task_ids(names text[], ids text[]) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint;
BEGIN
    WITH gone AS (
        DELETE FROM fleet_tasks t USING unnest(names, ids) AS x(q, i)
        WHERE t.name = x.q AND t.task_id = x.i AND t.state IN ('completed', 'failed', 'cancelled')
        RETURNING t.name, t.state
    ), per AS (
        SELECT g.name, count(*) FILTER (WHERE g.state = 'completed') AS ok,
               count(*) FILTER (WHERE g.state <> 'completed') AS bad
        FROM gone g GROUP BY g.name
    ), kept AS (
        UPDATE fleet_queue_flow f
        SET kept_ok = greatest(f.kept_ok - per.ok, 0), kept_bad = greatest(f.kept_bad - per.bad, 0)
        FROM per WHERE f.name = per.name
    )
    SELECT coalesce(sum(per.ok + per.bad), 0) INTO n FROM per;
    RETURN n;
END $$;
