"""What an event webhook's body looks like (ALERTS_FORMAT, ALERTS_DIGEST; docs/analytics.md, "The
request"): our JSON, one delivery per POST (the default); Slack's incoming-webhook `{"text": …}`, one
line per delivery; and, with the digest, one POST per subscription per pass carrying its deliveries
(`{"digest": true, "subscription_id", "deliveries": [...]}`, or one Slack message of their lines).
Signing is the sender's (delivery.py): every format is signed the same way."""

from __future__ import annotations

import json
from typing import Any

FORMATS = ("json", "slack")


def _money(value: Any) -> str:
    return f"{float(value):.2f}" if isinstance(value, (int, float)) else "?"


def slack_line(doc: dict[str, Any]) -> str:
    """One delivery as one line of text (Slack shows it as sent: no markup is built from the event's text)."""
    kind = str(doc.get("type", "alert"))
    if kind == "availability_changed":
        return (
            f"{kind}: {doc.get('brand')} in {doc.get('state')}: carried by {doc.get('stores')} of "
            f"{doc.get('stores_crawled')} stores ({doc.get('change')} since {doc.get('compared_with')})"
        )
    where = f"{doc.get('store')} ({doc.get('state')})"
    line = f"{kind}: {doc.get('product')} [{doc.get('brand')}] at {where}"
    if kind == "price_changed":
        line += f": {_money(doc.get('price_rec_old'))} → {_money(doc.get('price_rec'))} ({doc.get('change_pct')} %)"
    return line


def body(docs: list[dict[str, Any]], fmt: str, *, digest: bool, subscription_id: int) -> bytes:
    """The POST's body for these deliveries' documents (one, unless `digest`)."""
    if fmt == "slack":
        doc: dict[str, Any] = {"text": "\n".join(slack_line(d) for d in docs)}
    elif digest:
        doc = {"digest": True, "subscription_id": subscription_id, "deliveries": docs}
    else:
        (doc,) = docs
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
