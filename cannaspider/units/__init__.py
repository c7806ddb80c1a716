"""Units of work: what a role is (role.py, declared once on its spider) and the spider arguments
that name a crawl's units (arguments.py)."""
