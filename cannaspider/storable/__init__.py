"""Values PostgreSQL stores as they are: the column-safe rules, independent of any payload.

The writers send each batch of 1,000 products of many stores as one statement, and a single value
PostgreSQL refuses would lose them all, so what a normalizer hands on must be storable: strings
(`text`), numbers within their columns (`numeric`), timestamps in a sane window (`times`),
fetchable URLs (`urls`). What a product lost to these rules is logged, rate limited (`degraded`).
"""
