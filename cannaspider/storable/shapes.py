"""A payload's containers as what they should be: anything else reads as empty."""

from __future__ import annotations

from typing import Any


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
