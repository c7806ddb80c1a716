"""A batch's pages done, from one poll's answer (cannaspider/firecrawl/progress.py pages_done): what
Firecrawl's counts say (docs/firecrawl.md: a failed page leaves `total`), and what they do not."""

from __future__ import annotations

import pytest

from cannaspider.firecrawl.progress import pages_done


@pytest.mark.parametrize(
    ("submitted", "invalid", "arrived", "total", "finished", "done"),
    [
        (4, 0, 0, 4, False, 0),  # nothing yet
        (4, 0, 1, 4, False, 1),  # one document
        (4, 0, 1, 3, False, 2),  # and one page failed: it left `total`
        (4, 1, 1, 3, False, 2),  # a refused URL is done, and never was in `total`
        (4, 0, 0, 0, False, 0),  # a `total` of 0 while running says nothing yet
        (4, 0, 0, 0, True, 4),  # an all-failed batch reads 0/0 completed: every page is done
        (4, 0, 9, 4, False, 4),  # never more than was sent
    ],
)
def test_pages_done(submitted, invalid, arrived, total, finished, done):
    assert pages_done(submitted, invalid, arrived, total, finished) == done
