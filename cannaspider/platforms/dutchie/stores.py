"""Dutchie dispensary objects → DispensaryRecord."""

from __future__ import annotations

from typing import Any

from cannaspider.items import DispensaryRecord


def _float(value: object) -> float | None:
    if not isinstance(value, (int, float, str)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):  # "abc", or an int too big for a float
        return None


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def menu_url_of(obj: dict[str, Any]) -> str | None:
    """The store's own site when its menu is embedded there, else its Dutchie menu."""
    own = _text(obj.get("embeddedMenuUrl"))
    if own:
        return own
    listed = _text(obj.get("menuUrl"))
    if listed:
        return listed
    cname = _text(obj.get("cName"))
    return f"https://dutchie.com/dispensary/{cname}" if cname else None


def dispensary_record(obj: dict[str, Any]) -> DispensaryRecord | None:
    """None when the object has no id or name (nothing we could key or show)."""
    if not isinstance(obj, dict):
        return None
    pid, name = _text(obj.get("id")), _text(obj.get("name"))
    if not pid or not name:
        return None
    location = _dict(obj.get("location"))
    coords = _dict(location.get("geometry")).get("coordinates")
    lng, lat = (coords[0], coords[1]) if isinstance(coords, list) and len(coords) == 2 else (None, None)
    return DispensaryRecord(
        platform_dispensary_id=pid,
        name=name,
        slug=_text(obj.get("cName")),
        menu_url=menu_url_of(obj),
        address=_text(obj.get("address")),
        city=_text(location.get("city")),
        state=_text(location.get("state")),
        zip=_text(location.get("zipcode")),
        lat=_float(lat),
        lng=_float(lng),
        timezone=_text(obj.get("timezone")),
        phone=_text(obj.get("phone")),
        is_recreational=obj.get("recDispensary") if isinstance(obj.get("recDispensary"), bool) else None,
        is_medical=obj.get("medicalDispensary") if isinstance(obj.get("medicalDispensary"), bool) else None,
        raw=obj,
    )
