"""The words of a text, for the semantic profile (docs/onpage.md): its words and 2–3-word phrases
(the profile's units) counted by lemma, the stop words of its language (stop_words_for), and the
language code of a tag (language_code).

A text is cut into segments at line breaks and sentence punctuation, so that no phrase spans two
sentences, two headings or two paragraphs. A segment's tokens are its runs of letters and
digits, lowercased (an apostrophe or a hyphen separates tokens: `l'huile` gives `l`, `huile`).
A token with no letter (a number) or of one character breaks a phrase, as punctuation does.

Terms of a segment, given the language's stop words:
- a word: a token that is not a stop word;
- a 2-word phrase: two consecutive tokens, neither a stop word;
- a 3-word phrase: three consecutive tokens whose first and last are not stop words (the middle
  one may be: `huile de cbd`).

A term is counted by its lemmas (`huiles de cbd` and `huile de cbd` are one term, `huile de cbd`),
given the language's lemmatizer (lemmatizer_for: simplemma's dictionaries, shipped in its wheel);
the surface forms met are counted beside it, for display. Stop words are judged on the surface
form, as the lists are written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from functools import cache, lru_cache

import simplemma
import stop_words

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


Lemma = Callable[[str], str]


def as_is(token: str) -> str:
    """The lemmatizer of a language simplemma lacks: a token is its own lemma."""
    return token


# the languages simplemma has dictionaries for (its wheel ships them; nothing is downloaded)
LEMMA_LANGUAGES = frozenset(simplemma.strategies.dictionaries.dictionary_factory.SUPPORTED_LANGUAGES)


@cache
def lemmatizer_for(lang: str | None) -> Lemma:
    """A token's lemma in `lang` (ISO 639-1), memoized: a page repeats its words, and a SERP its
    pages' words. `as_is` for a language without a dictionary."""
    if not lang or lang not in LEMMA_LANGUAGES:
        return as_is

    @lru_cache(maxsize=200_000)
    def lemma(token: str) -> str:
        # simplemma may answer with a capital (a proper noun's entry): terms are lowercase
        return simplemma.lemmatize(token, lang=lang).lower() or token

    return lemma


def count_terms(
    text: str, stops: frozenset[str], lemma: Lemma = as_is, forms: dict[str, Counter[str]] | None = None
) -> tuple[Counter[str], int]:
    """(term → occurrences, number of tokens): the text's words and phrases as defined above, each
    term its tokens' lemmas; `forms`, when given, gets term → surface form → occurrences."""
    counts: Counter[str] = Counter()
    length = 0
    for seg in segments(text):
        length += sum(1 for t in seg if t is not None)
        for i, first in enumerate(seg):
            if first is None or first in stops:
                continue
            lemmas = [lemma(first)]
            _count(counts, forms, lemmas[0], first)
            for n in range(2, MAX_N + 1):
                gram = seg[i : i + n]
                if len(gram) < n or gram[-1] is None:
                    break
                lemmas.append(lemma(gram[-1]))
                if gram[-1] in stops or (n == 2 and gram[1] in stops):
                    continue
                _count(counts, forms, " ".join(lemmas), " ".join(gram))  # type: ignore[arg-type]  # no None left
    return counts, length


def _count(counts: Counter[str], forms: dict[str, Counter[str]] | None, term: str, surface: str) -> None:
    counts[term] += 1
    if forms is not None:
        forms.setdefault(term, Counter())[surface] += 1


def terms_in(texts: Iterable[str], stops: frozenset[str], lemma: Lemma = as_is) -> set[str]:
    """The terms that occur at least once in any of the texts."""
    found: set[str] = set()
    for text in texts:
        found.update(count_terms(text, stops, lemma)[0])
    return found


# Stop words per language.
#
# The lists are the `stop-words` package's (curated per language, shipped as files inside the
# package: nothing is downloaded). Its English list is the extended one (about 1,300 words, so
# `best` or `new` are stop words); its French list has the elided forms (`l'`, `d'`, `qu'`), which
# our tokenizer splits off anyway (docs/onpage.md, "Semantic profile"). A page's language, when its
# HTML does not say it, is language.py's.

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
