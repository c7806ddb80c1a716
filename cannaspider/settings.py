"""Scrapy settings for cannaspider, grouped by concern.

Environment overrides are applied once, at the bottom, from cannaspider.env (the only module
that reads os.environ for settings). `-s NAME=value` on the command line still wins.
"""

from typing import Any

from cannaspider import env, platforms

BOT_NAME = "cannaspider"
SPIDER_MODULES = ["cannaspider.spiders"]
NEWSPIDER_MODULE = "cannaspider.spiders"
COMMANDS_MODULE = "cannaspider.commands"

# --- Engine ---------------------------------------------------------------------------------
# The asyncio reactor is Scrapy's default; psycopg's async pool and scrapy-playwright need it.
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
ROBOTSTXT_OBEY = False  # GraphQL endpoints, not pages; politeness comes from the limits below
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 32
DOWNLOAD_TIMEOUT = 60
RETRY_ENABLED = True
RETRY_TIMES = 3
# 403/503 reach the spiders, which tell a Cloudflare block or challenge page from an API error
# (platforms/dutchie/graphql.py) and end that store's crawl as incomplete; retrying them blindly won't help.
RETRY_HTTP_CODES = [500, 502, 504, 522, 524, 408]
HTTPERROR_ALLOWED_CODES = [403, 503]
# 429 is waited out, not retried blindly (middlewares/rate_limit.py): Retry-After (seconds or an
# HTTP date), else RATE_LIMIT_BACKOFF_S doubled per retry; a longer wait than RATE_LIMIT_MAX_WAIT_S
# or more than RATE_LIMIT_MAX_RETRIES retries leaves that store's crawl incomplete.
RATE_LIMIT_MAX_RETRIES = 3
RATE_LIMIT_MAX_WAIT_S = 60.0
RATE_LIMIT_BACKOFF_S = 2.0
DOWNLOADER_MIDDLEWARES = {
    "cannaspider.middlewares.rate_limit.RetryAfterMiddleware": 560,
    # proxy + identity per store crawl; below 590 and 560 (decompressed bodies, 429s past their
    # bound), above RetryMiddleware (550): see middlewares/stealth.py
    "cannaspider.middlewares.stealth.StealthProxyMiddleware": 555,
    # below HttpCompressionMiddleware (590): it reads the decompressed body
    "cannaspider.platforms.dutchie.persisted_queries.PersistedQueryFallbackMiddleware": 580,
}
SPIDER_MIDDLEWARES = {
    "cannaspider.middlewares.proxy_required.ProxyRequiredMiddleware": 10,
    # closest to the spider (Scrapy's own end at 900): counts each unit's requests and items, and a
    # callback's exception closes its unit of work before anything else sees it (units/middleware.py)
    "cannaspider.units.middleware.UnitTrackingMiddleware": 950,
}
# Scrapy starts CONCURRENT_ITEMS tasks for every response and queues up to twice as many items: 64
# takes a whole FilteredProducts page (DUTCHIE_PER_PAGE = 100) without blocking, with a third of the
# tasks that 200 cost (measured: the product crawl ~20 % faster with pipelines off, ~8 % with them on).
CONCURRENT_ITEMS = 64
LOG_LEVEL = "INFO"
# The per-crawler services are extensions (one of each per crawler, found with the public
# crawler.get_extension: cannaspider/extensions/__init__.py). Scrapy builds them in this order, after
# the spider and before the engine; each finds the others at run time, so the order is that of their
# signal handlers: a service's after those of the services it uses.
EXTENSIONS = {
    "cannaspider.extensions.gc_tuning.GCTuning": 0,
    # the database side of the crawl (its pool, the write ledger, crawl-run liveness: db/crawl_runs.py):
    # db/crawl_database.py
    "cannaspider.db.crawl_database.CrawlDatabase": 100,
    # the crawl's proxy pools, one per name, made when a component first asks (stealth/pool.py)
    "cannaspider.stealth.pool.ProxyPools": 100,
    # the crawl's task drain, once its spider opens one (tasks/drain.py)
    "cannaspider.tasks.drain.CrawlDrain": 150,
    # a store's close: its misses, OOS and events in one transaction, its task's outcome (uses the
    # database and the drain): units/crawl_close.py
    "cannaspider.units.crawl_close.CrawlClose": 200,
    # the units of work: handed out, tracked, closed once (uses the database and the drain; its
    # spider_closed waits for the database's to close the runs still open): units/lifecycle.py
    "cannaspider.units.lifecycle.UnitLifecycle": 300,
    # crawl health at spider close (cannaspider/monitors, docs/health.md)
    "cannaspider.monitors.extension.CrawlHealth": 500,
    # the crawl's stats to a Pushgateway or node_exporter's textfile collector: off unless
    # METRICS_PUSHGATEWAY_URL or METRICS_TEXTFILE_DIR is set (cannaspider/metrics/crawl.py)
    "cannaspider.metrics.crawl.CrawlMetrics": 510,
}
GC_THRESHOLDS = [100_000, 50, 100]  # see extensions/gc_tuning.py; [] keeps CPython's defaults
LOG_FORMATTER = "cannaspider.logformatter.QuietItemsLogFormatter"
LOG_SCRAPED_ITEMS = False  # True: Scrapy's per-item "Scraped from" DEBUG lines
TELNETCONSOLE_ENABLED = False
# Scrapy 2.19's RemoteControl extension serves Python code execution on localhost for every crawl
# and leaves a token file in the home folder when the process is killed. Off, like the Telnet
# console; `-s REMOTE_CONTROL_ENABLED=True` turns it on for a debugging session.
REMOTE_CONTROL_ENABLED = False
# Scrapy re-reads and parses a callback's source (inspect.getsource + ast) for every response whose
# callback is a bound method, since its cache holds them weakly and each dies with its request: ~4 %
# of a product crawl's CPU. tests/spiders/test_callbacks.py runs the same check over every spider's
# callbacks once, so a generator that returns a value still fails a test.
WARN_ON_GENERATOR_RETURN_VALUE = False

# --- Local state ----------------------------------------------------------------------------
CANNASPIDER_DATA_DIR = str(env.data_dir())
DATABASE_URL = None  # None: embedded PostgreSQL under CANNASPIDER_DATA_DIR/postgres
DB_POOL_MAX_SIZE = 4
DB_POOL_TIMEOUT_S = 30.0  # how long a write waits for a connection (a database restart) before it fails
# (once one such wait failed and the server does not answer a connection attempt, requests fail at
# once while it stays so: db/connection.py, FailFastPool)
DB_WRITE_BATCH_SIZE = 1000  # products per write statement (their store_products rows and snapshots)
# How long a store's completion waits for its rows to be committed before it counts as incomplete,
# and how long it lets batches fill with other stores' rows before flushing them early.
CRAWL_COMPLETION_WAIT_S = 120.0
CRAWL_COMPLETION_BATCH_GRACE_S = 5.0
# Liveness of crawl_runs (db/crawl_runs.py): a crawl stamps its open runs every HEARTBEAT_S; the
# next crawl marks failed a 'running' run without a stamp for STALE_AFTER_S (a few beats), or whose
# process on this host is gone. A stopped crawl closes its open runs as 'incomplete' itself.
CRAWL_RUN_HEARTBEAT_S = 30.0
CRAWL_RUN_STALE_AFTER_S = 120.0
# A long crawl says how far it is, when something moved since its last line: its units (stores,
# keywords, tasks) closed out of its `-a` targets, or out of the tasks claimed so far, every
# UNITS_PROGRESS_INTERVAL_S (units/lifecycle.py; 0: never; per crawl `-s UNITS_PROGRESS_INTERVAL_S=10`).
UNITS_PROGRESS_INTERVAL_S = 60.0
CANNASPIDER_MIGRATIONS_DIR = None  # None: migrations/ beside scrapy.cfg
# A complete crawl that sees fewer than this share of the store's in-stock products is an incident
# (a collapsed menu), not evidence: it counts no misses and its crawl_runs row is marked suspect
# (units/crawl_close.py's CLOSE_COMPLETE). 0 turns the guard off, for a store that
# closed; an empty menu counts no misses either way (README "Crawl correctness").
OOS_GUARD_MIN_SHARE = 0.5
# A complete crawl's close writes one product_events row per change it saw (listed, price_changed,
# special_started/ended, out_of_stock, back_in_stock: docs/analytics.md "Events"). Off only to
# measure what they cost (benchmarks/ingest.py --no-events); changes made while off are reported,
# against the last state that wrote events, by the first crawl after it is on again.
PRODUCT_EVENTS_ENABLED = True

# --- Dutchie --------------------------------------------------------------------------------
DUTCHIE_GRAPHQL_URL = "https://dutchie.com/api-3/graphql"
# Dutchie caps perPage: above the cap the spider detects it on a store's first page and follows it
# for the rest of that store's crawl (platforms/dutchie/pagination.py), with a warning.
DUTCHIE_PER_PAGE = 100
# Hard cap against a server that pages forever; a store past it is an incomplete crawl.
DUTCHIE_MAX_PAGES = 100
# Persisted-query hashes rotate every few months. A stale one is answered once with
# PersistedQueryNotFound; the operation then goes out with the full query text for the rest of the
# run (platforms/dutchie/persisted_queries.py, which warns); update them here when that happens.
# (the hashes are data of the platform's package: cannaspider/platforms/dutchie/operations.py)
DUTCHIE_PERSISTED_HASHES = dict(platforms.get("dutchie").default_settings["DUTCHIE_PERSISTED_HASHES"])
DUTCHIE_CLIENT_NAME = "Marketplace (production)"
# Store discovery: search radius (miles) around each populated place of the state.
DUTCHIE_SEARCH_DISTANCE_MI = 50
DUTCHIE_SEARCH_MIN_POPULATION = 15000

# --- Jane (iHeartJane): menus and stores on Jane's Algolia (docs/jane.md) ----------------------
# The application id and search-only key are those Jane's web front end ships to every browser.
JANE_ALGOLIA_URL = "https://search.iheartjane.com"
JANE_ALGOLIA_APP_ID = "VFM4X0N23A"
JANE_ALGOLIA_API_KEY = "edc5435c65d771cecbd98bbd488aa8d3"
JANE_PRODUCTS_INDEX = "menu-products-production"
JANE_STORES_INDEX = "stores-production"
# hits per products page: Algolia's maximum (most menus are one page)
JANE_PER_PAGE = 1000
# Hard cap against a server that pages forever; a store past it is an incomplete crawl.
JANE_MAX_PAGES = 20
# Store discovery: search radius (miles) around each populated place of the state.
JANE_SEARCH_DISTANCE_MI = 50
JANE_SEARCH_MIN_POPULATION = 15000

# --- Stealth: proxies (the `proxies` table) and browser identities (docs/stealth.md) ----------
# Proxies are mandatory for Dutchie spiders; there is no setting that turns them off.
STEALTH_BLOCK_RETRIES = 3  # a blocked page is retried this often, each time with another proxy and identity
# A proxy is deactivated (is_active = false) when MAX_FAILURES of its last ATTEMPT_WINDOW attempts
# (a success, or a failure event) failed: five in a row, or a quarter of its recent attempts.
STEALTH_PROXY_MAX_FAILURES = 5
STEALTH_PROXY_ATTEMPT_WINDOW = 20
STEALTH_PROXY_REFRESH_S = 60.0  # the table is re-read this often during a crawl (added/disabled proxies)
STEALTH_HEALTH_FLUSH_S = 5.0  # proxy health reaches the table in batches this often, and at close
STEALTH_PROXY_BACKOFF_S = 30.0  # a failed proxy rests a random time up to this, doubled per failure…
STEALTH_PROXY_BACKOFF_CAP_S = 600.0  # …up to this (it is still used when every proxy is resting)
# Failures of one proxy within this window of the first (or of requests already in flight then)
# are one event: MAX_FAILURES counts events, so a sub-second blip is not five failures. 0: each counts.
STEALTH_FAILURE_WINDOW_S = 5.0
# A queue-draining spider whose pool empties gives its tasks back (attempts not counted), claims
# nothing, and re-reads the table this often until a proxy is active again (-a follow=1: it goes on).
STEALTH_OUTAGE_POLL_S = 10.0
# `scrapy schedule` re-probes proxies that their failures deactivated (never those an operator
# disabled): the first probe this long after the deactivation, then doubling per failed probe up
# to the cap; at most PROXY_REPROBE_BATCH per tick. One GraphQL request through the proxy (as
# `scrapy proxies check`) to PROXY_PROBE_URL (empty: DUTCHIE_GRAPHQL_URL); a pass re-activates it.
PROXY_REPROBE_ENABLED = True
PROXY_REPROBE_AFTER_S = 300.0
PROXY_REPROBE_BACKOFF_CAP_S = 6 * 3600.0
PROXY_REPROBE_BATCH = 20
PROXY_PROBE_URL = ""
PROXY_PROBE_TIMEOUT_S = 20.0
# The claimed browser's TLS and HTTP/2 handshake (curl_cffi) for requests whose meta has
# `impersonate` (every Dutchie request: the stealth middleware sets it from the identity); any
# other request goes through Scrapy's own HTTP/1.1 handler. See cannaspider/stealth/tls.py.
DOWNLOAD_HANDLERS = {
    "http": "cannaspider.stealth.tls.ImpersonatingDownloadHandler",
    "https": "cannaspider.stealth.tls.ImpersonatingDownloadHandler",
}
TLS_IMPERSONATE_MAX_SESSIONS = 64  # kept curl sessions (proxy x identity); the least recently used closes

# --- Browser (scrapy-playwright), for stores whose menu lives on their own website ---------
CHROMIUM_PATH = "/usr/bin/chromium"
PLAYWRIGHT_BROWSER_TYPE = "chromium"
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 30_000
# the browser spider sets its own (spiders/entry_point_discovery.py); the stealth middleware reads
# its executable_path, else CHROMIUM_PATH
PLAYWRIGHT_LAUNCH_OPTIONS: dict[str, Any] = {}

# --- Firecrawl ------------------------------------------------------------------------------
FIRECRAWL_API_URL = None
FIRECRAWL_API_KEY = None
# The crawl_onpage spider (docs/onpage.md): poll each batch about every 3 s, give up on it after
# 5 minutes (what arrived is kept, the rest is `timeout`), 30 s per page on Firecrawl's side.
FIRECRAWL_POLL_INTERVAL_S = 3.0
FIRECRAWL_BATCH_BUDGET_S = 300.0
FIRECRAWL_PAGE_TIMEOUT_MS = 30000
FIRECRAWL_REQUEST_TIMEOUT_S = 60.0  # one Firecrawl API call; retried once on a network timeout
FIRECRAWL_BATCH_MAX_URLS = 25  # a batch's answer carries every page's HTML (capped near 10 MiB)
ONPAGE_MIN_WORDS = 1  # a rendered page with fewer main-text words is `empty`
# The corpus of each `ok` page (docs/onpage.md, "Corpus"): bounded so that one huge page costs a
# bounded time and row. A page is parsed on its first ONPAGE_MAX_HTML_CHARS characters of HTML
# (a 20 MB page is cut, not parsed whole); at most ONPAGE_CORPUS_MAX_CHARS of main text are kept
# (and as much serialized JSON-LD), at most ONPAGE_CORPUS_MAX_ITEMS headings, alt texts, anchors
# and JSON-LD blocks, each heading/alt/anchor text cut at ONPAGE_CORPUS_MAX_ITEM_CHARS.
ONPAGE_MAX_HTML_CHARS = 5_000_000
ONPAGE_CORPUS_MAX_CHARS = 200_000
ONPAGE_CORPUS_MAX_ITEMS = 500
ONPAGE_CORPUS_MAX_ITEM_CHARS = 500
# Reading a rendered page (docs/onpage.md, "Hostile pages"): off the event loop, in up to
# ONPAGE_PARSE_WORKERS processes of its own per crawl process; a page not read within
# ONPAGE_PARSE_TIMEOUT_S (a normal page takes tens of milliseconds) is `empty` with that reason and
# its process is killed and replaced; a parser process has ONPAGE_PARSE_MAX_MEMORY_MB of address
# space (about 100 MB of it is the interpreter and the parser): a page that needs more is `empty`.
ONPAGE_PARSE_WORKERS = 2
ONPAGE_PARSE_TIMEOUT_S = 20.0
ONPAGE_PARSE_MAX_MEMORY_MB = 1024
# The semantic profile of a keyword × locale (docs/onpage.md, "Semantic profile"): a term must be
# used by this many competitor pages (or all of them, if fewer answered) to be listed; the
# heaviest PROFILE_MAX_TERMS are kept.
PROFILE_MIN_PAGES = 2
PROFILE_MAX_TERMS = 200
# Our page against the SERP (docs/onpage.md, "Our page against theirs"): a term is one "most top
# pages use" when at least GAP_MIN_SHARE of the weighed pages use it; our page under-uses it when
# its weight there is below GAP_UNDER_RATIO of the SERP's (over-uses it past the inverse); at most
# GAP_MAX_TERMS terms in each of the gap's lists (missing, under-used, over-used, heading terms).
GAP_MIN_SHARE = 0.5
GAP_UNDER_RATIO = 0.5
GAP_MAX_TERMS = 30

# --- Pipelines and feeds --------------------------------------------------------------------
# Every pipeline sees every item, and each step costs a few microseconds per item whether it
# acts or not: each spider enables only the group its items need (spiders/base.py update_settings).
DISCOVERY_PIPELINES = {
    "cannaspider.pipelines.dispensary_writer.DispensaryWriterPipeline": 100,
}
PRODUCT_PIPELINES = {
    "cannaspider.pipelines.normalize.NormalizeProductPipeline": 200,
    "cannaspider.monitors.validation.StoreProductValidationPipeline": 250,
    "cannaspider.pipelines.product_writer.ProductWriterPipeline": 300,
    "cannaspider.pipelines.images.ProductImagesPipeline": 400,  # queues the image; never holds the item
}
ITEM_PIPELINES = {**DISCOVERY_PIPELINES, **PRODUCT_PIPELINES}
# Scrapy's chain, but a pipeline's plain return value goes straight to the next one (no coroutine
# per pipeline per item); see pipelines/item_processor.py.
ITEM_PROCESSOR = "cannaspider.pipelines.item_processor.DirectCallItemPipelineManager"
# Each crawl also writes its items as JSON lines under a dated path (see README, "Feeds"): an
# add-on sets FEEDS when nobody else did, so `-O file.json` (or `-o`, `-s FEEDS=…`) replaces this
# default instead of being written beside it, and `-s FEEDS={}` writes no feed (see feeds.py).
ADDONS = {
    "cannaspider.feeds.DefaultFeed": 0,
    # CONTRACT_MODE under `scrapy check` (below, "Contracts")
    "cannaspider.contracts.ContractMode": 0,
}
CANNASPIDER_FEED_DIR = None  # None: CANNASPIDER_DATA_DIR/feeds
FEED_EXPORT_ENCODING = "utf-8"
# -O file.csv / file.xml: flat columns or elements, nested values as JSON text (cannaspider/exporters.py)
FEED_EXPORTERS = {
    "csv": "cannaspider.exporters.FlatCsvItemExporter",
    "xml": "cannaspider.exporters.FlatXmlItemExporter",
}
# a crawl that exported nothing (the analytics refresh, a store whose menu failed, a spider whose
# items are not of the feed's item_classes) leaves no file, rather than an empty one to wade through
FEED_STORE_EMPTY = False
FEED_URI_PARAMS = "cannaspider.feeds.uri_params"
# a feed file that cannot be written (a full disk) is one error line and exit 4, not a traceback
# per item; the crawl and its database writes go on (cannaspider/feed_storage.py)
FEED_STORAGES = {
    "": "cannaspider.feed_storage.GuardedFileFeedStorage",
    "file": "cannaspider.feed_storage.GuardedFileFeedStorage",
}

# --- Images (docs/images.md) ---------------------------------------------------------------
# Where product images are stored as webp: a folder, or any store Scrapy's media pipelines take
# (s3://bucket/prefix/, gs://…, ftp://…). None: CANNASPIDER_DATA_DIR/images.
IMAGES_STORE = None
IMAGES_CONCURRENCY = 8  # image downloads at a time, beside the crawl (of CONCURRENT_REQUESTS)
# A large crawl's image phase says how far it is (images done out of those queued, waiting,
# downloading, stored, failed) every this many seconds, when something moved; 0: never. Per crawl:
# `-s IMAGES_PROGRESS_INTERVAL_S=10` (Scrapyd: schedule.json's setting=…).
IMAGES_PROGRESS_INTERVAL_S = 30.0
IMAGES_WEBP_QUALITY = 90  # the stored full-resolution copy; /img re-encodes from it
IMAGES_MAX_PIXELS = 50_000_000  # a larger image is refused from its header (a decompression bomb); /img too
# the pixels the conversions under way decode together (each counted from its header; more wait
# their turn; one larger runs alone): one image at the cap above at a time, beside the crawl's
# usual 1 MP ones by the dozen. 8 images of 49 MP at once: 1.78 GB peak RSS unbounded, 499 MB
# with this (benchmarks/convert_budget.py; docs/images.md, "Bounds")
IMAGES_CONVERT_BUDGET_PIXELS = 50_000_000
IMAGES_MIN_WIDTH = 0  # a smaller image is skipped (images_failed/small), as Scrapy's ImagesPipeline does
IMAGES_MIN_HEIGHT = 0
# The download → stored webp conversion: libvips. In a crawl it converts about twice as fast as
# Pillow's (benchmarks/pillow_convert.py; `benchmarks/ingest.py --converters`: Pillow / libvips
# 0.56, all 7 paired repeats below 1), though alone Pillow is as fast or faster (docs/images.md,
# "Which converter").
IMAGES_CONVERTER = "cannaspider.images.convert.to_webp"
# One slow or huge image must not hold a finished crawl open (it did for 4 × DOWNLOAD_TIMEOUT):
# images get their own timeout and byte cap (the downloader cancels a larger body, from its
# Content-Length when it has one), and no retry: an image not stored is asked for by the next crawl.
IMAGES_DOWNLOAD_TIMEOUT_S = 20.0
IMAGES_MAX_BYTES = 25 * 1024 * 1024
IMAGES_RETRY_TIMES = 0
# Every image source is fetched once, whatever the stores, crawls and nodes that list it (table
# image_sources, docs/images.md "One download per source"): a node claims a URL before fetching
# it. A claim whose node died mid-fetch is taken over once it is this old (longer than a download,
# IMAGES_DOWNLOAD_TIMEOUT_S, and its conversion and write); a failed fetch is released at once.
IMAGES_SOURCE_LEASE_S = 120.0
# The proxy pool product images and brand logos go through (the `pool` of rows in `proxies`,
# migration 030). "crawl", the crawl's own pool, by default: an image takes its store's session
# (proxy, identity, TLS). An image CDN is not the API that blocks, so an operator may add a cheaper
# pool (`scrapy proxies add --pool images URL`) and set IMAGES_PROXY_POOL = "images": images then
# go through it, one session per store, and never through the crawl's pool; with no active proxy
# in it an image fails (images_failed/filtered) and the next crawl asks again. docs/stealth.md.
IMAGES_PROXY_POOL = "crawl"
MEDIA_ALLOW_REDIRECTS = True  # image CDNs redirect
# /img (cannaspider/web/images.py): rendered variants are cached under IMG_CACHE_DIR (None:
# CANNASPIDER_DATA_DIR/image-cache) and served as immutable for IMG_MAX_AGE_S. With a remote
# IMAGES_STORE (s3://, gs://, ftp://: the AWS_*, GCS_PROJECT_ID, FTP_* settings the pipeline uses)
# the originals it reads are cached there too; each cache folder is bounded.
IMG_CACHE_DIR = None
IMG_CACHE_MAX_BYTES = 2 * 1024**3  # rendered variants on disk
IMG_ORIGINALS_CACHE_MAX_BYTES = 2 * 1024**3  # originals read from a remote store
IMG_STORE_TIMEOUT_S = 10.0  # a remote store that does not answer in time: 503
IMG_STORE_RETRY_S = 5.0  # after a 503, the store is not asked again for this long (Retry-After)
IMG_STORE_THREADS = 8  # reads from a remote store at a time
IMG_MAX_AGE_S = 31_536_000
IMG_MAX_PIXELS = 16_000_000  # the largest variant /img renders (w × h)
IMG_RENDER_THREADS = 0  # 0: one per core
IMG_MEMORY_CACHE_BYTES = 64 * 1024 * 1024  # recently served variants kept in memory
# Bounds on what anyone may ask /img for (docs/images.md, "Bounds"): requests waiting on a render
# per client address (above a browser's 6 connections per host: a page of thumbnails never meets
# it; past it a 429), and the pixels (source + output) of the renders in flight together (one
# render of a 16 MP source to 16 MP beside many thumbnails; the rest wait their turn).
IMG_RENDERS_PER_CLIENT = 6
IMG_RENDER_BUDGET_PIXELS = 40_000_000
# libvips (/img and the pipeline's conversion; cannaspider/images/convert.py), process-wide. Its
# operation cache would keep decoded pixels of recent renders beside /img's own caches of the
# encoded variants: off by default, bounded when on. VIPS_CONCURRENCY is libvips' worker threads
# per image: /img already renders IMG_RENDER_THREADS images at a time, so one each keeps every
# core busy without oversubscribing (measured: benchmarks/images.py).
VIPS_CACHE_MAX_OPERATIONS = 0
VIPS_CACHE_MAX_BYTES = 32 * 1024 * 1024
VIPS_CACHE_MAX_FILES = 0  # files the cache keeps open
VIPS_CONCURRENCY = 1

# --- Contracts (`scrapy check`) -------------------------------------------------------------
SPIDER_CONTRACTS = {
    "cannaspider.platforms.dutchie.contracts.GraphQLContract": 10,
    "cannaspider.contracts.WebsiteContract": 11,
}
# the stores the contracts name ({"sandbox:AZ:0": {"id", "cname", "lat", "lng"}}): filled by the
# development environment's `scrapy check` from the sandbox it starts (cannaspider/contracts.py)
CONTRACT_STORES: dict[str, Any] = {}
# True while `scrapy check` runs (set by the ContractMode add-on, cannaspider/contracts.py):
# contracts call callbacks directly, so a spider needs no target, the crawl database opens no
# database at start and the proxy pool writes no health
CONTRACT_MODE = False

# --- Task queue, schedule and HTTP service (cannaspider/tasks, cannaspider/web; docs/operations.md)
# tasks (stores) a draining spider runs at once: a task holds its slot until its rows are committed and
# its store closed, so with slots = CONCURRENT_REQUESTS the downloader idles (measured, 1,000 stores by
# two processes: +17 % crawl time at 32 slots, +0.4 % at 128; benchmarks/task_queue_e2e.py)
TASK_SLOTS = 128
TASK_CLAIM_BATCH = 50  # most tasks claimed by one statement
TASK_LEASE_S = 600.0  # a claimed task returns to the queue this long after its worker's last heartbeat
TASK_HEARTBEAT_S = 60.0
TASK_POLL_S = 5.0  # with -a follow=1: poll this often besides LISTEN/NOTIFY (delayed retries come due)
TASK_LISTEN = True
# A queue operation retries a lost database connection this long (a restart takes seconds); past
# it a drain without follow stops (its leases expire), one with -a follow=1 waits the outage out,
# claiming again after a doubling wait of up to TASK_OUTAGE_WAIT_MAX_S, one log line each time.
TASK_RECONNECT_S = 60.0
TASK_OUTAGE_WAIT_MAX_S = 60.0
TASK_RETRY_BACKOFF_S = 60.0  # failed attempt n waits BACKOFF·2^(n-1) (capped), jittered, before the next
TASK_RETRY_BACKOFF_MAX_S = 6 * 3600.0
TASK_RETENTION_DAYS = 30.0  # `scrapy schedule` deletes finished tasks older than this (crawl_runs stay)
SCHEDULE_TICK_S = 60.0  # `scrapy schedule` applies the table below this often
SCHEDULE_RESYNC_EVERY_S = 4 * 3600.0  # product_resync of each store whose last complete crawl is older
SCHEDULE_DISCOVERY_EVERY_S = 24 * 3600.0  # store_discovery of each state below
SCHEDULE_DISCOVERY_STATES: list[str] = []  # e.g. ["AZ", "MI"]; `-s SCHEDULE_DISCOVERY_STATES=AZ,MI`
# the platforms whose stores each of those states' discovery searches (cannaspider/platforms/),
# one task per state and platform; e.g. `-s SCHEDULE_DISCOVERY_PLATFORMS=dutchie,jane`
SCHEDULE_DISCOVERY_PLATFORMS: list[str] = ["dutchie"]
SCHEDULE_ANALYTICS_EVERY_S = 24 * 3600.0
ANALYTICS_REFRESH_WORK_MEM = "1GB"  # per refresh step: a day of snapshots at 2,000 stores sorts in memory
# The refresh's product roll runs as this many statements at once, each over its share of the
# products on a connection of its own (cannaspider/analytics/product_roll.py): PostgreSQL runs a
# statement that writes on one core, and the roll is most of a daily refresh's CPU. Up to the
# database server's cores; each part holds a connection and up to ANALYTICS_REFRESH_WORK_MEM. 1: one
# statement in one transaction, as before.
ANALYTICS_ROLL_PARTS = 2
# --- The history's cold tier (cannaspider/history, docs/history.md) ----------------------------
# `scrapy history archive` moves each month of snapshots older than AFTER_MONTHS full months
# before this one to a Parquet file in STORE (a folder or a file:// URI; a bucket mounted as a
# folder), verified row for row, and drops its partition; the history API and the exports read it
# there. None: nothing is archived.
HISTORY_ARCHIVE_STORE = None
HISTORY_ARCHIVE_AFTER_MONTHS = 3
API_HOST = "127.0.0.1"
API_PORT = 8000
CANNASPIDER_API_TOKEN = None  # required for writes (POST /api/tasks); None: writes are refused
API_MAX_BODY_BYTES = 64 * 1024  # the largest request body of any route (413): a task is ~100 bytes

# --- Alerts on events (event webhooks; cannaspider/webhooks/, docs/analytics.md "Alerts") ----
# `scrapy schedule` (its own task beside the ticks) or `scrapy webhooks send` matches subscriptions
# against new events and posts them, signed with HMAC-SHA256 over the body with
# ALERTS_WEBHOOK_SECRET (unset: nothing is sent; secret: never logged). A failed post is retried
# after BACKOFF·2^(n-1) (capped, jittered) up to MAX_ATTEMPTS. Events are read by when their
# crawl's close wrote them, from LOOKBACK before the previous pass: a close transaction open
# across a pass (seconds) is still matched.
ALERTS_WEBHOOK_SECRET = None
ALERTS_TIMEOUT_S = 10.0
ALERTS_BATCH = 100  # deliveries claimed and posted per pass
# posts in flight to one host at once (the rest of the batch waits its turn): a receiver is not sent
# a whole batch at once (cannaspider/webhooks/delivery.py)
ALERTS_PER_HOST_CONCURRENCY = 4
# the body: "json" (ours) or "slack" ({"text": ...}, one line per delivery); with ALERTS_DIGEST, one
# POST per subscription per pass with all its due deliveries (cannaspider/webhooks/formats.py)
ALERTS_FORMAT = "json"
ALERTS_DIGEST = False
ALERTS_MAX_ATTEMPTS = 20  # ~4 days of retries at the cap below: a receiver down for a weekend loses nothing
ALERTS_BACKOFF_S = 30.0
ALERTS_BACKOFF_MAX_S = 6 * 3600.0
ALERTS_MATCH_LOOKBACK_S = 3600.0
ALERTS_TICK_S = 60.0  # `scrapy schedule` and `scrapy webhooks send --follow`: a pass this often
SCHEDULE_ALERTS = True  # `scrapy schedule` delivers alerts (False: run `scrapy webhooks send --follow` instead)
# Both webhooks (these alerts' and ALERT_WEBHOOK_URL below) never follow a redirect, read at most
# 4 kB of an answer, and refuse a host that is or resolves to a loopback, private or link-local
# address unless this is True (a receiver on the operator's own network; cannaspider/webhooks/posting.py).
WEBHOOK_ALLOW_PRIVATE = False

# --- Crawl health (Spidermon; cannaspider/monitors, docs/health.md) ----------------------------
# A monitor over its threshold fails the crawl's health: an ERROR line, the report under
# HEALTH_REPORT_DIR (every crawl gets one) and a POST to ALERT_WEBHOOK_URL when set.
SPIDERMON_ENABLED = True
SPIDERMON_SPIDER_CLOSE_MONITORS = ["cannaspider.monitors.extension.CrawlHealthSuite"]
# While a crawl runs (a `-a follow=1` drainer runs for weeks), the same suite also judges, this
# often, the stretch of the crawl since its previous check, when a unit closed or an error was
# logged in it: a report, and an alert if a check failed (monitors/extension.py). 0: at close only.
HEALTH_CHECK_PERIOD_S = 300.0
HEALTH_OK_FINISH_REASONS = ["finished"]
# a stop the operator asked for (SIGTERM/SIGINT, Scrapyd's cancel.json: Scrapy's `shutdown`) is no
# alert: a deploy or restart that stops a `-a follow=1` drainer is not a failure (monitors/checks.py)
HEALTH_STOP_FINISH_REASONS = ["shutdown"]
HEALTH_MAX_ERRORS = 0  # ERROR and CRITICAL log lines a healthy crawl may have
HEALTH_MAX_INCOMPLETE_SHARE = 0.1  # of the stores a product crawl closed
HEALTH_MAX_PRODUCT_DROP = 0.3  # a store's products against its previous complete crawl
# many stores going empty at once (docs/health.md, "Empty menus"): at least this many, and more than
# this share of the stores crawled complete within the window, went empty within it
HEALTH_EMPTIED_WINDOW_S = 21600.0
HEALTH_MAX_EMPTIED_SHARE = 0.1
HEALTH_FLEET_EMPTIED_MIN_STORES = 3
HEALTH_MAX_BLOCKS_PER_PROXY = 10
HEALTH_MAX_STALE_HASH_FALLBACKS = 0  # any: the persisted hashes want updating
HEALTH_MAX_INVALID_ITEM_SHARE = 0.0  # of StoreProduct items breaking docs/item-schema.json
HEALTH_VALIDATION_SAMPLE_EVERY = 50  # validate every Nth product (~2 ms each); 1: all of them
# failed image downloads (a timeout, a 404, a broken file: images_failed/<reason>) against the
# images the crawl tried; fewer failures than HEALTH_MIN_IMAGE_FAILURES never fail the check, so
# one slow image is a warning line, not an alert (monitors/checks.py)
HEALTH_MAX_IMAGE_FAILURE_SHARE = 0.1
HEALTH_MIN_IMAGE_FAILURES = 10
HEALTH_REPORT_DIR = None  # None: CANNASPIDER_DATA_DIR/reports
ALERT_WEBHOOK_URL = None  # Slack-compatible incoming webhook (secret: never logged)
ALERT_WEBHOOK_TIMEOUT_S = 10.0
# a crawl's own metrics (docs/operations.md, "A crawl node's metrics"): its stats pushed to this
# Pushgateway and/or written to this folder of node_exporter's textfile collector, this often
METRICS_PUSHGATEWAY_URL = None
METRICS_TEXTFILE_DIR = None
METRICS_EXPORT_PERIOD_S = 15.0

# --- Environment overrides (the only place they are applied) --------------------------------
globals().update(env.overrides())
