"""The check WARN_ON_GENERATOR_RETURN_VALUE = False (settings.py) turns off per response, run once
here over every spider's callbacks: a generator callback that `return`s a value loses it silently."""

from __future__ import annotations

import inspect

from scrapy.spiderloader import SpiderLoader
from scrapy.utils.misc import is_generator_with_return_value
from scrapy.utils.project import get_project_settings


def _callbacks() -> list[tuple[str, object]]:
    loader = SpiderLoader.from_settings(get_project_settings())
    found = []
    for name in loader.list():
        spider = loader.load(name)
        for attr, value in inspect.getmembers(spider, inspect.isfunction):
            if inspect.isgeneratorfunction(value):
                found.append((f"{name}.{attr}", value))
    return found


def test_no_generator_callback_returns_a_value():
    callbacks = _callbacks()
    assert callbacks, "no generator callback found: the check looks at nothing"
    assert [name for name, func in callbacks if is_generator_with_return_value(func)] == []


def test_the_check_finds_a_generator_that_returns_a_value():
    def parse(response):
        yield {"a": 1}
        return "lost"

    assert is_generator_with_return_value(parse)
