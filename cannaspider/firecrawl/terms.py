"""Words and 2–3-word phrases of a text, the units of the semantic profile (docs/onpage.md).

A text is cut into segments at line breaks and sentence punctuation, so that no phrase spans two
sentences, two headings or two paragraphs. A segment's tokens are its runs of letters and
digits, lowercased (an apostrophe or a hyphen separates tokens: `l'huile` gives `l`, `huile`).
A token with no letter (a number) or of one character breaks a phrase, as punctuation does.

Terms of a segment, given the language's stop words:
- a word: a token that is not a stop word;
- a 2-word phrase: two consecutive tokens, neither a stop word;
- a 3-word phrase: three consecutive tokens whose first and last are not stop words (the middle
  one may be: `huile de cbd`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

SEGMENT_BREAK = re.compile(r"[\n\r.!?;:|•·…()\[\]{}\"«»“”]+|\s[-–—]\s")
TOKEN = re.compile(r"[^\W_]+")
MAX_N = 3


def segments(text: str) -> list[list[str | None]]:
    """Each segment's tokens; None stands where a number or one-character token broke it."""
    out = []
    for piece in SEGMENT_BREAK.split(text.lower()):
        tokens: list[str | None] = [
            t if len(t) > 1 and not t.isdigit() and any(c.isalpha() for c in t) else None for t in TOKEN.findall(piece)
        ]
        if any(t is not None for t in tokens):
            out.append(tokens)
    return out


def tokens(text: str) -> list[str]:
    """The text's words in order (the numbers and one-character tokens left out)."""
    return [t for seg in segments(text) for t in seg if t is not None]


def count_terms(text: str, stops: frozenset[str]) -> tuple[Counter[str], int]:
    """(term → occurrences, number of tokens): the text's words and phrases as defined above."""
    counts: Counter[str] = Counter()
    length = 0
    for seg in segments(text):
        length += sum(1 for t in seg if t is not None)
        for i, first in enumerate(seg):
            if first is None or first in stops:
                continue
            counts[first] += 1
            for n in range(2, MAX_N + 1):
                gram = seg[i : i + n]
                if len(gram) < n or any(t is None for t in gram):
                    break
                last = gram[-1]
                if last in stops or (n == 2 and gram[1] in stops):
                    continue
                counts[" ".join(gram)] += 1  # type: ignore[arg-type]  # no None left
    return counts, length


def terms_in(texts: Iterable[str], stops: frozenset[str]) -> set[str]:
    """The terms that occur at least once in any of the texts."""
    found: set[str] = set()
    for text in texts:
        found.update(count_terms(text, stops)[0])
    return found
