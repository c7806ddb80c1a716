"""What a store's close goes by and what it concluded (units/store_close.py closes the store).

The spider hands the close a StoreOutcome: what the crawl learned (the products it saw, whether
every page arrived and parsed, the queue's task it did). The close's transaction
(units/store_transaction.py) answers with a StoreVerdict: complete or incomplete, and for a
complete crawl whether its menu was empty, whether the OOS guard found it suspect and whether
the suspect crawls in a row confirm a collapse (db/store_close.py decides all three). The report
(units/store_report.py) reads only the verdict, so what is counted and logged is what the transaction recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cannaspider.tasks.queue import Task


@dataclass
class StoreOutcome:
    """What a store's crawl learned, for its close."""

    dispensary_id: int
    crawl_run_id: int | None
    complete: bool
    products_yielded: int
    pages_fetched: int
    seen_product_ids: list[str] = field(default_factory=list, repr=False)
    errors: int = 0
    error: str | None = None
    task: Task | None = field(default=None, repr=False)  # the queue's task this crawl did, if any


@dataclass
class StoreVerdict:
    """What a store's close recorded. `figures` are the close statement's parameters, with the
    misses and 'oos' the statement counted (0 unless the crawl was recorded complete)."""

    complete: bool
    error: str | None
    figures: dict[str, Any]
    suspect: bool = False
    confirmed: bool = False  # the suspect crawl that confirms a collapse
    seen_in_stock: int = 0
    in_stock: int = 0
    streak: int = 0
    events: int = 0
    # an empty menu (complete, no product seen): no miss counted, the store's state recorded instead
    empty: bool = False
    store_event: str | None = None  # 'menu_emptied' / 'menu_returned' when this crawl wrote one
    empty_since: datetime | None = None  # the store's menu empty since (this crawl's, or the state it ended)
    # the crawl's task was lost or its run closed already: nothing recorded, and its task is not
    # ours to fail either
    lost: bool = False
