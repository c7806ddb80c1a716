"""Scrapy settings for cannaspider, grouped by concern.

Environment overrides are applied once, at the bottom, from cannaspider.env (the only module
that reads os.environ for settings). `-s NAME=value` on the command line still wins.
"""

from cannaspider import env
from cannaspider.dutchie.operations import DEFAULT_PERSISTED_HASHES

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
# (dutchie/graphql.py) and end that store's crawl as incomplete; retrying them blindly won't help.
RETRY_HTTP_CODES = [500, 502, 504, 522, 524, 408]
HTTPERROR_ALLOWED_CODES = [403, 503]
# Scrapy starts CONCURRENT_ITEMS tasks for every response and queues up to twice as many items: 64
# takes a whole FilteredProducts page (DUTCHIE_PER_PAGE = 100) without blocking, with a third of the
# tasks that 200 cost (measured: the product crawl ~20 % faster with pipelines off, ~8 % with them on).
CONCURRENT_ITEMS = 64
LOG_LEVEL = "INFO"
EXTENSIONS = {"cannaspider.extensions.gc_tuning.GCTuning": 0}
GC_THRESHOLDS = [100_000, 50, 100]  # see extensions/gc_tuning.py; [] keeps CPython's defaults
LOG_FORMATTER = "cannaspider.logformatter.QuietItemsLogFormatter"
LOG_SCRAPED_ITEMS = False  # True: Scrapy's per-item "Scraped from" DEBUG lines
TELNETCONSOLE_ENABLED = False

# --- Local state ----------------------------------------------------------------------------
CANNASPIDER_DATA_DIR = str(env.data_dir())
DATABASE_URL = None  # None: embedded PostgreSQL under CANNASPIDER_DATA_DIR/postgres
DB_POOL_MAX_SIZE = 4
DB_WRITE_BATCH_SIZE = 1000  # products per write statement (their store_products rows and snapshots)
# How long a store's completion waits for its rows to be committed before it counts as incomplete,
# and how long it lets batches fill with other stores' rows before flushing them early.
CRAWL_COMPLETION_WAIT_S = 120.0
CRAWL_COMPLETION_BATCH_GRACE_S = 5.0
# A crawl_runs row still 'running' after this long belongs to a process that died: marked failed.
CRAWL_RUN_ABANDONED_AFTER = "2 hours"

# --- Dutchie --------------------------------------------------------------------------------
DUTCHIE_GRAPHQL_URL = "https://dutchie.com/api-3/graphql"
DUTCHIE_PER_PAGE = 100
# Hard cap against a server that pages forever; a store past it is an incomplete crawl.
DUTCHIE_MAX_PAGES = 100
# Persisted-query hashes rotate every few months. A stale one costs one extra request per page
# (the spider falls back to the full query text and warns); update them here when that happens.
DUTCHIE_PERSISTED_HASHES = dict(DEFAULT_PERSISTED_HASHES)
DUTCHIE_CLIENT_NAME = "Marketplace (production)"
# Store discovery: search radius (miles) around each populated place of the state.
DUTCHIE_SEARCH_DISTANCE_MI = 50
DUTCHIE_SEARCH_MIN_POPULATION = 15000

# --- Browser (scrapy-playwright), for stores whose menu lives on their own website ---------
CHROMIUM_PATH = "/usr/bin/chromium"
PLAYWRIGHT_BROWSER_TYPE = "chromium"
PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT = 30_000

# --- Firecrawl ------------------------------------------------------------------------------
FIRECRAWL_API_URL = None
FIRECRAWL_API_KEY = None

# --- Pipelines and feeds --------------------------------------------------------------------
# Every pipeline sees every item, and each step costs a few microseconds per item whether it
# acts or not: each spider enables only the group its items need (spiders/base.py update_settings).
DISCOVERY_PIPELINES = {
    "cannaspider.pipelines.dispensary_writer.DispensaryWriterPipeline": 100,
}
PRODUCT_PIPELINES = {
    "cannaspider.pipelines.normalize.NormalizeProductPipeline": 200,
    "cannaspider.pipelines.product_writer.ProductWriterPipeline": 300,
    "cannaspider.pipelines.crawl_completion.CrawlCompletionPipeline": 900,
}
ITEM_PIPELINES = {**DISCOVERY_PIPELINES, **PRODUCT_PIPELINES}
# Scrapy's chain, but a pipeline's plain return value goes straight to the next one (no coroutine
# per pipeline per item); see pipelines/item_processor.py.
ITEM_PROCESSOR = "cannaspider.pipelines.item_processor.DirectCallItemPipelineManager"
# Each crawl also writes its items as JSON lines under a dated path (see README, "Feeds").
# `-O file.json` on the command line replaces this default.
CANNASPIDER_FEED_DIR = None  # None: CANNASPIDER_DATA_DIR/feeds
FEED_EXPORT_ENCODING = "utf-8"
FEED_URI_PARAMS = "cannaspider.feeds.uri_params"

# --- Contracts (`scrapy check`) -------------------------------------------------------------
SPIDER_CONTRACTS = {"cannaspider.contracts.GraphQLContract": 10, "cannaspider.contracts.WebsiteContract": 11}

# --- Task queue, schedule and HTTP service (cannaspider/tasks, cannaspider/web; docs/operations.md)
TASK_SLOTS = 16  # tasks (stores) a draining spider runs at once
TASK_CLAIM_BATCH = 50  # most tasks claimed by one statement
TASK_LEASE_S = 600.0  # a claimed task returns to the queue this long after its worker's last heartbeat
TASK_HEARTBEAT_S = 60.0
TASK_POLL_S = 5.0  # with -a follow=1: poll this often besides LISTEN/NOTIFY (delayed retries come due)
TASK_LISTEN = True
TASK_RETRY_BACKOFF_S = 60.0  # failed attempt n waits BACKOFF·2^(n-1) (capped), jittered, before the next
TASK_RETRY_BACKOFF_MAX_S = 6 * 3600.0
SCHEDULE_TICK_S = 60.0  # `scrapy schedule` applies the table below this often
SCHEDULE_RESYNC_EVERY_S = 4 * 3600.0  # product_resync of each store whose last complete crawl is older
SCHEDULE_DISCOVERY_EVERY_S = 24 * 3600.0  # store_discovery of each state below
SCHEDULE_DISCOVERY_STATES: list[str] = []  # e.g. ["AZ", "MI"]; `-s SCHEDULE_DISCOVERY_STATES=AZ,MI`
SCHEDULE_ANALYTICS_EVERY_S = 24 * 3600.0
API_HOST = "127.0.0.1"
API_PORT = 8000
CANNASPIDER_API_TOKEN = None  # required for writes (POST /api/tasks); None: writes are refused

# --- Environment overrides (the only place they are applied) --------------------------------
globals().update(env.overrides())

FEEDS = {
    f"{CANNASPIDER_FEED_DIR or CANNASPIDER_DATA_DIR + '/feeds'}/%(name)s/%(date)s/%(time)s.jsonl": {
        "format": "jsonlines",
        "item_classes": ["cannaspider.items.StoreProduct", "cannaspider.items.DispensaryRecord"],
    },
}
