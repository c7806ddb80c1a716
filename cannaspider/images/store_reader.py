"""What every reader of a stored image is to /img (the opener, cannaspider/images/stores.py, picks
one by IMAGES_STORE's scheme): `read(path)` returns the bytes, or None when the store has no such
file; a store that cannot be reached or refuses us raises StoreUnavailable, whose reason names the
store without its credentials, so /img can show it as is.

Every path is checked against the only shapes the pipeline writes before any key is built
(cannaspider/images/paths.py): `..`, absolute, percent-encoded or upper-case paths never reach a
store. The readers of the remote kinds (cannaspider/images/cloud_stores.py,
cannaspider/images/ftp_store.py) depend on this module and not on the opener, which imports them.
"""

from __future__ import annotations

from typing import Protocol

from cannaspider.images.paths import is_stored_path_shape


class StoreConfigError(ValueError):
    """IMAGES_STORE cannot be read by /img (a missing client library, a URI without a host)."""


class StoreUnavailable(Exception):
    """The store did not answer (`status` 503: try again later) or refused us (502).
    The reason is safe to show: it never holds a credential."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class StoreReader(Protocol):
    identity: str  # the store's URI without credentials: in ETags, logs and errors

    def read(self, path: str) -> bytes | None: ...


def object_key(prefix: str, path: str) -> str:
    """The name `path` has in a store whose URI ends in `prefix` (Scrapy's `prefix + path`);
    ValueError for a path the pipeline cannot have written."""
    if not is_stored_path_shape(path):
        raise ValueError(f"not a stored image path: {path!r}")
    return prefix + path
