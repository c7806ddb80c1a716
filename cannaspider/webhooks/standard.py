"""Standard Webhooks signatures (https://www.standardwebhooks.com): what a stock verifier checks, so
a receiver needs no code of ours. Three headers on every signed POST:

    webhook-id         the message's id: the same on every retry of one delivery (dedupe on it)
    webhook-timestamp  Unix seconds of this attempt
    webhook-signature  v1,<base64 HMAC-SHA256 over "<id>.<timestamp>.<body>">

The key: a secret written `whsec_<base64>` (the standard's form) is those bytes; any other secret is
its own UTF-8 bytes (a receiver then gives its verifier the bytes, or `whsec_` + their base64).
Used by the event webhooks (delivery.py) and the crawl-health webhook (monitors/health_notify.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

PREFIX = "whsec_"
ID = "webhook-id"
TIMESTAMP = "webhook-timestamp"
SIGNATURE = "webhook-signature"


def key(secret: str) -> bytes:
    if secret.startswith(PREFIX):
        # unpadded base64 is common in whsec_ secrets: b64decode ignores padding beyond what it needs
        return base64.b64decode(secret[len(PREFIX) :] + "==")
    return secret.encode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {ID: msg_id, TIMESTAMP: str(timestamp), SIGNATURE: signature(secret, msg_id, timestamp, body)}
