-- The task queue's machinery (cannaspider/tasks; docs/architecture.md, "Task queue"):
--   * an identical pending or running task (same role, platform, store, payload) exists at most once:
--     enqueue is INSERT ... ON CONFLICT on this partial unique index, so two processes enqueueing
--     the same task at the same moment get the same row;
--   * a task remembers the crawl run it last drove (crawl_runs.task_id points back);
--   * a task that becomes claimable wakes LISTENing workers (channel cannaspider_tasks, payload: role);
--   * claim_task() keeps its contract and, when it returns an expired lease to the queue, also closes
--     the crawl run the dead worker left 'running' (that crawl marks nothing missing: it never completed).

-- Rows that would break the new index (possible only on a database used before it) are cancelled,
-- keeping the running one, else the most urgent and oldest.
UPDATE worker_tasks t
   SET status = 'cancelled', updated_at = now(),
       error = coalesce(t.error || '; ', '') || 'duplicate of an identical task (migration 007)'
  FROM (SELECT id, row_number() OVER (PARTITION BY role, platform, dispensary_id, payload
                                      ORDER BY (status = 'running') DESC, priority DESC, created_at, id) AS n
          FROM worker_tasks WHERE status IN ('pending', 'running')) d
 WHERE t.id = d.id AND d.n > 1;

CREATE UNIQUE INDEX worker_tasks_active_identity
    ON worker_tasks (role, platform, dispensary_id, payload) NULLS NOT DISTINCT
    WHERE status IN ('pending', 'running');

ALTER TABLE worker_tasks ADD COLUMN crawl_run_id bigint;

-- The schedule asks "was this store's product work tried lately and failed or cancelled?" and
-- "when was this role's last store-less task created?". Both indexes are partial so that claims
-- and completions (running, completed) never write to them.
CREATE INDEX worker_tasks_store_tried_idx ON worker_tasks (dispensary_id, created_at DESC)
    WHERE status IN ('failed', 'cancelled') AND dispensary_id IS NOT NULL;
CREATE INDEX worker_tasks_storeless_idx ON worker_tasks (role, payload, created_at DESC)
    WHERE dispensary_id IS NULL;
CREATE INDEX crawl_runs_task_idx ON crawl_runs (task_id) WHERE task_id IS NOT NULL;

-- Row triggers with WHEN: the condition is checked without calling the function, so claims
-- (pending -> running) and completions pay nothing. NOTIFY folds identical payloads per transaction.
CREATE FUNCTION worker_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cannaspider_tasks', NEW.role);
    RETURN NULL;
END $$;

CREATE TRIGGER worker_tasks_notify_insert AFTER INSERT ON worker_tasks
    FOR EACH ROW WHEN (NEW.status = 'pending' AND NEW.run_after <= now())
    EXECUTE FUNCTION worker_tasks_notify();
CREATE TRIGGER worker_tasks_notify_requeue AFTER UPDATE OF status ON worker_tasks
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending' AND NEW.run_after <= now())
    EXECUTE FUNCTION worker_tasks_notify();

-- Tasks whose lease expired (killed worker, lost machine) go back to the queue, their attempt
-- counted (claim_task counted it), or fail for good once they have used their attempts. The dead
-- worker's crawl run is closed as failed: it never completed, so it marked nothing missing.
-- claim_task() runs it for its role; the schedule runs it for every role (p_role NULL).
CREATE FUNCTION requeue_expired_tasks(p_role text DEFAULT NULL) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH expired AS (
        UPDATE worker_tasks
           SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
               error = coalesce(error || '; ', '') || 'lease expired (worker ' || coalesce(claimed_by, '?') || ')',
               completed_at = CASE WHEN attempts >= max_attempts THEN now() END,
               claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
         WHERE status = 'running' AND lease_expires_at < now() AND (p_role IS NULL OR role = p_role)
        RETURNING id),
    runs AS (
        UPDATE crawl_runs
           SET status = 'failed', finished_at = now(),
               duration_ms = (extract(epoch FROM now() - started_at) * 1000)::integer,
               error = 'lease expired: the worker died or lost its task'
         WHERE status = 'running' AND task_id IN (SELECT id FROM expired))
    SELECT count(*) INTO n FROM expired;
    RETURN n;
END $$;

-- Claims walk this index in claim order (003's lacked the id tie-breaker, so every claim sorted
-- the whole pending set).
DROP INDEX worker_tasks_claim_idx;
CREATE INDEX worker_tasks_claim_idx ON worker_tasks (role, priority DESC, created_at, id) WHERE status = 'pending';

-- Same signature, order and guarantees as 003's. Expired leases go through requeue_expired_tasks()
-- (which also fails the dead worker's crawl run). The batch is claimed by one statement (003 ran a
-- subtransaction per row, which cost more than the claim itself), keeping one task per store. Only
-- when a concurrent claimer took another task of one of the same stores in the meantime (the
-- unique index worker_tasks_one_running_per_store refuses the batch) does it fall back to claiming
-- row by row, each store taken under an advisory lock and checked again.
CREATE OR REPLACE FUNCTION claim_task(
    p_role      text,
    p_worker    text,
    p_limit     integer  DEFAULT 1,
    p_lease     interval DEFAULT interval '10 minutes'
) RETURNS SETOF worker_tasks LANGUAGE plpgsql AS $$
DECLARE
    cand    worker_tasks;
    ids     bigint[] := '{}';
BEGIN
    PERFORM requeue_expired_tasks(p_role);

    BEGIN
        WITH cand AS (
            SELECT t.id, t.dispensary_id, t.priority, t.created_at FROM worker_tasks t
             WHERE t.status = 'pending' AND t.role = p_role AND t.run_after <= now()
               AND (t.dispensary_id IS NULL OR NOT EXISTS (
                    SELECT 1 FROM worker_tasks r WHERE r.dispensary_id = t.dispensary_id AND r.status = 'running'))
             ORDER BY t.priority DESC, t.created_at ASC, t.id ASC
             FOR UPDATE SKIP LOCKED
             LIMIT p_limit),
        one_per_store AS (
            SELECT DISTINCT ON (coalesce(c.dispensary_id, -c.id)) c.id FROM cand c
             ORDER BY coalesce(c.dispensary_id, -c.id), c.priority DESC, c.created_at, c.id),
        claimed AS (
            UPDATE worker_tasks w
               SET status = 'running', attempts = w.attempts + 1, claimed_by = p_worker,
                   claimed_at = now(), heartbeat_at = now(), lease_expires_at = now() + p_lease,
                   updated_at = now()
              FROM one_per_store o WHERE w.id = o.id
            RETURNING w.id)
        SELECT coalesce(array_agg(id), '{}') INTO ids FROM claimed;
    EXCEPTION WHEN unique_violation THEN
        ids := '{}';
        FOR cand IN
            SELECT t.* FROM worker_tasks t
             WHERE t.status = 'pending' AND t.role = p_role AND t.run_after <= now()
               AND (t.dispensary_id IS NULL OR NOT EXISTS (
                    SELECT 1 FROM worker_tasks r WHERE r.dispensary_id = t.dispensary_id AND r.status = 'running'))
             ORDER BY t.priority DESC, t.created_at ASC, t.id ASC
             FOR UPDATE SKIP LOCKED
             LIMIT p_limit
        LOOP
            IF cand.dispensary_id IS NOT NULL THEN
                -- (classid, objid) form: a key space apart from the migrations' bigint lock; a hash
                -- collision only skips a store until the next claim
                CONTINUE WHEN NOT pg_try_advisory_xact_lock(1952543595, hashint8(cand.dispensary_id));
                CONTINUE WHEN EXISTS (SELECT 1 FROM worker_tasks r
                                       WHERE r.dispensary_id = cand.dispensary_id AND r.status = 'running');
            END IF;
            UPDATE worker_tasks
               SET status = 'running', attempts = attempts + 1, claimed_by = p_worker,
                   claimed_at = now(), heartbeat_at = now(), lease_expires_at = now() + p_lease,
                   updated_at = now()
             WHERE id = cand.id;
            ids := ids || cand.id;
        END LOOP;
    END;

    RETURN QUERY SELECT * FROM worker_tasks WHERE id = ANY (ids) ORDER BY priority DESC, created_at, id;
END $$;
