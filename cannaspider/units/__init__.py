"""Units of work: the spider arguments that name a crawl's `-a` targets (arguments.py), the one
start path and lifecycle of every role's units, a target's or a queued task's (lifecycle.py,
middleware.py), and a store crawl's close (crawl_close.py). The roles themselves are data beneath
the queue (cannaspider/tasks/roles.py)."""
