"""Custom `scrapy` commands (COMMANDS_MODULE): migrate, db, crawl (with exit codes), enqueue, tasks,
schedule, serve, proxies, keywords, brands, export, alerts. The development commands (`scrapy
sandbox`, `scrapy demo` and a `scrapy check` that starts a sandbox) live in the top-level sandbox
package (sandbox/commands/), registered as entry points by its own distribution."""
