-- The task queue: priorities, chaining, leases. claim_task() hands out pending tasks of a role,
-- priority DESC then created_at ASC, FOR UPDATE SKIP LOCKED, in batches, and never a task for a
-- store that already has one running (also enforced by a unique partial index).

CREATE TABLE worker_tasks (
    id                bigserial PRIMARY KEY,
    role              text        NOT NULL,
    platform          text        NOT NULL DEFAULT 'dutchie',
    dispensary_id     bigint      REFERENCES dispensaries (id) ON DELETE CASCADE,
    payload           jsonb       NOT NULL DEFAULT '{}',
    priority          integer     NOT NULL DEFAULT 0,
    status            text        NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    attempts          integer     NOT NULL DEFAULT 0,
    max_attempts      integer     NOT NULL DEFAULT 5,
    run_after         timestamptz NOT NULL DEFAULT now(),
    claimed_by        text,
    claimed_at        timestamptz,
    heartbeat_at      timestamptz,
    lease_expires_at  timestamptz,
    error             text,
    result            jsonb,
    parent_task_id    bigint      REFERENCES worker_tasks (id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz
);
CREATE INDEX worker_tasks_claim_idx ON worker_tasks (role, priority DESC, created_at) WHERE status = 'pending';
CREATE INDEX worker_tasks_lease_idx ON worker_tasks (lease_expires_at) WHERE status = 'running';
CREATE UNIQUE INDEX worker_tasks_one_running_per_store
    ON worker_tasks (dispensary_id) WHERE status = 'running' AND dispensary_id IS NOT NULL;

CREATE FUNCTION claim_task(
    p_role      text,
    p_worker    text,
    p_limit     integer  DEFAULT 1,
    p_lease     interval DEFAULT interval '10 minutes'
) RETURNS SETOF worker_tasks LANGUAGE plpgsql AS $$
DECLARE
    cand    worker_tasks;
    claimed worker_tasks;
    n       integer := 0;
BEGIN
    -- A worker that died leaves its lease to expire: its task goes back to the queue (or fails
    -- for good once it has used its attempts).
    UPDATE worker_tasks
       SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
           error = coalesce(error || '; ', '') || 'lease expired (worker ' || coalesce(claimed_by, '?') || ')',
           claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
     WHERE status = 'running' AND lease_expires_at < now() AND role = p_role;

    FOR cand IN
        SELECT t.* FROM worker_tasks t
         WHERE t.status = 'pending' AND t.role = p_role AND t.run_after <= now()
           AND (t.dispensary_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM worker_tasks r WHERE r.dispensary_id = t.dispensary_id AND r.status = 'running'))
         ORDER BY t.priority DESC, t.created_at ASC, t.id ASC
         FOR UPDATE SKIP LOCKED
         LIMIT p_limit
    LOOP
        EXIT WHEN n >= p_limit;
        BEGIN
            UPDATE worker_tasks
               SET status = 'running', attempts = attempts + 1, claimed_by = p_worker,
                   claimed_at = now(), heartbeat_at = now(), lease_expires_at = now() + p_lease,
                   updated_at = now()
             WHERE id = cand.id
            RETURNING * INTO claimed;
            n := n + 1;
            RETURN NEXT claimed;
        EXCEPTION WHEN unique_violation THEN
            -- another task of the same store was claimed in this batch or by a concurrent worker
            NULL;
        END;
    END LOOP;
END $$;
