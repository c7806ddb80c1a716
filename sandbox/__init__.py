"""Local stand-ins for the remote services (Dutchie GraphQL, Firecrawl v2, a forward proxy).

They behave like the real ones, failures included, and listen on loopback only. The demo, the
tests and the benchmarks run against them; production points the same settings elsewhere.
"""
