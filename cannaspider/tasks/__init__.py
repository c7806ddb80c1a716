"""The task queue (worker_tasks): the role table (roles.py), enqueue/claim/complete/fail, schedule, draining.

See docs/operations.md for the operating model and docs/architecture.md, "Task queue".
"""
