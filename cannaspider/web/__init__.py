"""The HTTP service (`scrapy serve`): FastAPI over the task queue. See cannaspider/web/app.py."""
