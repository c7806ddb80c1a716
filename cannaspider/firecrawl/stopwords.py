"""Stop words per language, and a page's language when its HTML does not say it.

The lists are the `stop-words` package's (curated per language, shipped as files inside the
package: nothing is downloaded). Its English list is the extended one (about 1,300 words, so
`best` or `new` are stop words); its French list has the elided forms (`l'`, `d'`, `qu'`), which
our tokenizer splits off anyway (docs/onpage.md, "Semantic profile").

A page's language comes from `<html lang>` first, then Firecrawl's `metadata.language` (which
reads the same attribute or the Content-Language header), and only then from its text: the
language whose stop words make up the largest share of its words, if that share is at least
GUESS_MIN_SHARE (running text is 30–50 % stop words; a list of product names is not).
"""

from __future__ import annotations

import re
from functools import cache

import stop_words

# the languages a text is guessed among: the SERP locales we serve, plus close neighbours
GUESS_LANGUAGES = ("fr", "en", "de", "es", "it", "nl", "pt")
GUESS_MIN_SHARE = 0.15
GUESS_SAMPLE = 2000  # words read to guess
LANG_TAG = re.compile(r"^\s*([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*\s*$")


def language_code(tag: object) -> str | None:
    """`fr-FR`, `FR`, `en_US` → `fr`, `en`; None for anything that is not a language tag."""
    if not isinstance(tag, str):
        return None
    m = LANG_TAG.match(tag)
    return m.group(1).lower() if m else None


@cache
def stop_words_for(lang: str | None) -> frozenset[str]:
    """The stop words of a language (ISO 639-1), lowercased; empty for a language without a list."""
    if not lang:
        return frozenset()
    try:
        words = stop_words.get_stop_words(lang)
    except stop_words.StopWordError:
        return frozenset()
    return frozenset(w.lower().rstrip("'’") for w in words if w.strip())


def guess_language(tokens: list[str]) -> str | None:
    """The language whose stop words cover the largest share of `tokens` (lowercased words)."""
    sample = tokens[:GUESS_SAMPLE]
    if not sample:
        return None
    best, best_share = None, 0.0
    for lang in GUESS_LANGUAGES:
        stops = stop_words_for(lang)
        share = sum(1 for t in sample if t in stops) / len(sample)
        if share > best_share:
            best, best_share = lang, share
    return best if best_share >= GUESS_MIN_SHARE else None
