"""A page's language from its text, when its HTML and Firecrawl do not say it (docs/onpage.md,
"Language").

py3langid (a naive Bayes model over byte n-grams, 97 languages, its model inside its 4.6 MB
wheel: nothing is downloaded) was chosen over lingua (a 96 MB wheel) on short page texts in the
seven languages of our SERPs: 81/84 right against 80/84 when both are restricted to the seven,
every sentence and paragraph right for both, and 0.1 ms a text against 1.5 ms
(benchmarks/langid_short_pages.py). It decides among all its languages, not the seven: a page in
Polish on a French SERP must be told apart from a French one, not made the nearest of the seven.
A text too short to carry its language (fewer than MIN_WORDS words) or decided with a
probability below MIN_PROBABILITY has no language (None).

Loading the model takes about 1.5 s and 76 MB: the parser processes' fork server loads it once
(parser_pool.py preloads language_loaded), so each parser process starts with it (about 260 MB of
address space with the parser, extruct included, against ~130 MB before this issue).
"""

from __future__ import annotations

import os
import re
from functools import cache

# py3langid scores with numpy, whose OpenBLAS reserves a buffer per core at import: ~40 MB of a
# parser process's capped address space (ONPAGE_PARSE_MAX_MEMORY_MB) for one small product a
# text. One thread, unless the environment says otherwise (read at numpy's import, which is next).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from py3langid.langid import MODEL_FILE, LanguageIdentifier

SAMPLE_CHARS = 5000  # the start of the text is enough, and keeps a 200,000-character text cheap
MIN_WORDS = 3
MIN_PROBABILITY = 0.5
WORD = re.compile(r"[^\W\d_]{2,}")


@cache
def identifier() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect(text: str) -> str | None:
    """The text's language (ISO 639-1), or None when it cannot be told."""
    sample = text[:SAMPLE_CHARS]
    if len(WORD.findall(sample)) < MIN_WORDS:
        return None
    lang, probability = identifier().classify(sample)
    return str(lang) if probability >= MIN_PROBABILITY else None
