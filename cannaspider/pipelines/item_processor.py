"""The ITEM_PROCESSOR: Scrapy's ItemPipelineManager, minus a coroutine per pipeline per item.

Scrapy's chain wraps every pipeline's return value in a fresh coroutine and awaits it, and
formats the pipeline's import path for a possible deprecation warning, whether or not the
pipeline returned an awaitable. A menu crawl sends every product through four pipelines that
almost always answer synchronously; on the sandbox ingest benchmark that wrapping cost about
1.2 µs per pipeline per product (3 µs for the first), a tenth of what the pipelines themselves
cost. Here a plain return value is passed straight to the next pipeline; an awaitable (a coroutine,
a Future) is awaited, a Deferred converted with Scrapy's `maybe_deferred_to_future` after the
deprecation warning Scrapy's chain gives. When any pipeline method still requires a `spider`
argument (deprecated in Scrapy 2.14, which warns of it and passes one), every item gets the stock
chain, unchanged: the test for it is Scrapy's own (a `spider` parameter without a default), read
from the methods' signatures, not from the manager's private bookkeeping.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from types import GeneratorType
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.python import global_object_name
from twisted.internet.defer import Deferred


def requires_spider(method: Callable[..., Any]) -> bool:
    """A pipeline method Scrapy calls with a `spider` (a required parameter of that name)."""
    try:
        parameter = inspect.signature(method).parameters.get("spider")
    except (TypeError, ValueError):  # no signature to read (a builtin): Scrapy's chain decides
        return True
    return parameter is not None and parameter.default is inspect.Parameter.empty


class DirectCallItemPipelineManager(ItemPipelineManager):
    def __init__(self, *middlewares: Any, crawler: Crawler | None = None) -> None:
        super().__init__(*middlewares, crawler=crawler)
        # types seen returned that are never awaitable (the items): one set lookup per step
        # instead of inspect.isawaitable's ABC check. Generators are decided per object.
        self._plain_types: set[type] = set()
        # the direct calls only when no pipeline method wants a `spider` argument
        self.direct_calls = not any(
            requires_spider(method) for methods in self.methods.values() for method in methods if method is not None
        )
        self._process_item: list[Callable[[Any], Any]] = [m for m in self.methods["process_item"] if m is not None]

    async def process_item_async(self, item: Any) -> Any:
        if not self.direct_calls:
            return await super().process_item_async(item)
        plain = self._plain_types
        for method in self._process_item:
            item = method(item)
            kind = type(item)
            if kind in plain:
                continue
            if inspect.isawaitable(item):
                if isinstance(item, Deferred):  # as Scrapy's chain warns of it
                    warnings.warn(
                        f"{global_object_name(method)} returned a Deferred, this is deprecated."
                        " Please refactor this function to return a coroutine.",
                        ScrapyDeprecationWarning,
                        stacklevel=2,
                    )
                    item = await maybe_deferred_to_future(item)
                else:
                    item = await item
            elif kind is not GeneratorType:
                plain.add(kind)
        return item
