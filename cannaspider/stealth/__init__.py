"""Stealth for Dutchie requests: the database-backed proxy pool and coherent browser identities
(see docs/stealth.md)."""
