"""Event webhooks: product events and market moves, delivered to the operators' webhooks, signed
(docs/analytics.md, "Alerts"; `scrapy webhooks`). Not the crawl-health notifications, which are the
monitors' (cannaspider/monitors/health_notify.py), though both post through posting.py.

subscriptions.py  the operators' subscriptions (`scrapy webhooks add|list|remove`)
match.py          new events and availability changes → one delivery per subscription, once
delivery.py       one pass (match, then post what is due, signed, retrying failures with a
                  doubling wait) and the loop that repeats it (`scrapy webhooks send [--follow]`)
posting.py        one POST to a webhook: never redirected, its answer bounded, private hosts refused
"""
