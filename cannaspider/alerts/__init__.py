"""Alerts on product events and market moves, delivered as signed webhooks (docs/analytics.md, "Alerts").

subscriptions.py  the operators' subscriptions (`scrapy alerts add|list|remove`)
match.py          new events and availability changes → one delivery per subscription, once
signing.py        the HMAC-SHA256 signature a receiver checks
sender.py         posts due deliveries, retrying failures with a doubling wait
"""
