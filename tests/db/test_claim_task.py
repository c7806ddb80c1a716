"""claim_task(): priority order, SKIP LOCKED batches, one running task per store, lease expiry."""

from __future__ import annotations

import concurrent.futures

import psycopg


def add_task(sql, role="product_resync", dispensary_id=None, priority=0, **extra):
    cols = {"role": role, "dispensary_id": dispensary_id, "priority": priority, **extra}
    return sql(
        f"INSERT INTO worker_tasks ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))}) RETURNING id",
        tuple(cols.values()),
    )[0][0]


def claim(db, role="product_resync", worker="w1", limit=1, lease="10 minutes"):
    with psycopg.connect(db, autocommit=True) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT id FROM claim_task(%s, %s, %s, %s::interval)", (role, worker, limit, lease)
            ).fetchall()
        ]


def stores(sql, n):
    return [sql("INSERT INTO dispensaries (name) VALUES (%s) RETURNING id", (f"s{i}",))[0][0] for i in range(n)]


def test_priority_then_age(db, sql):
    d = stores(sql, 3)
    low = add_task(sql, dispensary_id=d[0], priority=0)
    high = add_task(sql, dispensary_id=d[1], priority=20)
    mid = add_task(sql, dispensary_id=d[2], priority=10)
    assert claim(db, limit=3) == [high, mid, low]


def test_never_two_running_tasks_for_one_store(db, sql):
    d = stores(sql, 2)
    first = add_task(sql, dispensary_id=d[0], priority=5)
    add_task(sql, dispensary_id=d[0], priority=5, payload='{"manual": true}')  # identical tasks are one (007)
    other = add_task(sql, dispensary_id=d[1])
    assert claim(db, limit=5) == [first, other]
    assert claim(db, limit=5) == []  # the second task of store 0 waits for the first


def test_concurrent_workers_never_take_the_same_task(db, sql):
    d = stores(sql, 40)
    for i in range(40):
        add_task(sql, dispensary_id=d[i])

    def worker(w: int) -> list[int]:
        mine: list[int] = []
        while batch := claim(db, worker=f"w{w}", limit=3):
            mine += batch
        return mine

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(worker, range(8)))
    # a worker stops at its first empty claim (others held the rest locked); drain what is left
    taken = [t for b in batches for t in b] + worker(99)
    assert len(taken) == len(set(taken)) == 40  # every task handed out, none twice
    assert sql("SELECT count(*) FROM worker_tasks WHERE status = 'running'")[0][0] == 40


def test_expired_lease_goes_back_to_the_queue_then_fails_after_max_attempts(db, sql):
    d = stores(sql, 1)
    task = add_task(sql, dispensary_id=d[0], max_attempts=2)
    assert claim(db, lease="0 seconds") == [task]  # the worker dies: its lease expires at once
    assert claim(db, lease="0 seconds") == [task]  # requeued and claimed again (attempt 2)
    assert claim(db) == []  # attempts used up: failed, not stuck
    status, attempts, error = sql("SELECT status, attempts, error FROM worker_tasks WHERE id = %s", (task,))[0]
    assert (status, attempts) == ("failed", 2) and "lease expired" in error


def test_run_after_in_the_future_is_not_claimed(db, sql):
    add_task(sql, run_after="2999-01-01")
    assert claim(db) == []
