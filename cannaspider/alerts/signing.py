"""The signature of a webhook delivery: HMAC-SHA256 over "<timestamp>.<body>" with the shared
secret (ALERTS_WEBHOOK_SECRET), sent as `X-Cannaspider-Signature: sha256=<hex>` beside
`X-Cannaspider-Timestamp` (Unix seconds). A receiver recomputes it over the raw body, compares in
constant time and refuses an old timestamp (a replay). The timestamp is signed with the body, so
neither can be changed alone."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE = "X-Cannaspider-Signature"
TIMESTAMP = "X-Cannaspider-Timestamp"
DELIVERY = "X-Cannaspider-Delivery"  # the delivery's id: the same on every retry (at least once: dedupe on it)


def sign(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: int, body: bytes, signature: str) -> bool:
    """What a receiver does (and the tests' receiver): constant-time comparison."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)
