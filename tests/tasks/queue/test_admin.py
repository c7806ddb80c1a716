"""The operators' actions on a real PostgreSQL: cancel, retry, list."""

from __future__ import annotations

import pytest

from cannaspider.tasks.queue import admin, enqueuing
from cannaspider.tasks.roles import TaskInputError
from tests.tasks.conftest import add_store, add_stores


def test_cancel_and_retry(q, sql):
    d = add_store(sql)
    task = q(enqueuing.enqueue, "product_resync", dispensary_id=d).task
    assert q(admin.cancel, task.id).status == "cancelled"
    with pytest.raises(TaskInputError, match="is cancelled: only pending or running"):
        q(admin.cancel, task.id)
    twin = q(enqueuing.enqueue, "product_resync", dispensary_id=d).task
    with pytest.raises(TaskInputError, match=rf"an identical task \({twin.id}\) is already queued"):
        q(admin.retry, task.id)
    q(admin.cancel, twin.id)
    retried = q(admin.retry, task.id)
    assert (retried.status, retried.attempts) == ("pending", 0)
    with pytest.raises(TaskInputError, match="is pending: only failed or cancelled"):
        q(admin.retry, task.id)
    with pytest.raises(TaskInputError, match="task 999 does not exist"):
        q(admin.retry, 999)


def test_list_tasks_filters_and_pages(q, sql):
    stores = add_stores(sql, 7)
    for d in stores:
        q(enqueuing.enqueue, "product_resync", dispensary_id=d)
    q(enqueuing.enqueue, "analytics_refresh")
    page = q(admin.list_tasks, role="product_resync", limit=3)
    assert [t.id for t in page.tasks] == [7, 6, 5] and page.next_before_id == 5
    page = q(admin.list_tasks, role="product_resync", limit=3, before_id=page.next_before_id)
    assert [t.id for t in page.tasks] == [4, 3, 2]
    page = q(admin.list_tasks, role="product_resync", limit=3, before_id=page.next_before_id)
    assert [t.id for t in page.tasks] == [1] and page.next_before_id is None
    assert [t.role for t in q(admin.list_tasks, status="pending", limit=1).tasks] == ["analytics_refresh"]
    with pytest.raises(TaskInputError, match="unknown status 'done'"):
        q(admin.list_tasks, status="done")
