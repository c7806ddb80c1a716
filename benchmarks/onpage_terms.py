"""The semantic profile's top terms, counted by surface form (before lemmas) and by lemma (now),
on the sandbox's French and English SERPs and the pages captured from a real self-hosted Firecrawl.

    python benchmarks/onpage_terms.py              # top 30 of each SERP, before and after
    python benchmarks/onpage_terms.py --top 10
    python benchmarks/onpage_terms.py --page saved.html --page fr=other.html   # with real pages

`--page FILE` adds a real page saved to disk (its rendered HTML) to the SERP of its language, which
is decided as the job decides it: `<html lang>`, else the `LANG=` prefix standing for Firecrawl's
metadata.language, else the detector. A page of a language with no SERP here (fr, en) is named and
left out; a page the classifier does not keep (blocked, empty) is named with its status. With
`--pages-only` the SERPs hold the saved pages alone: a term then needs fewer pages
(PROFILE_MIN_PAGES is capped at the SERP's size), so a real page's own vocabulary shows.

The SERPs: each language's sandbox article (`fr-guide`, `en-guide`) and three full-size article
pages of the same language built from its words (benchmarks/onpage_concurrency.py: the site frame
around ~2,000 words, sections in another order); the English SERP also has the two pages of
tests/fixtures/firecrawl-v2/03_get_completed.json (rendered by a real Firecrawl). Each page is
classified as the job classifies it (challenge check, on-page parser, trafilatura's main text),
and the profile computed with the project's settings (PROFILE_MIN_PAGES, PROFILE_MAX_TERMS).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.onpage_concurrency import full_size_page  # noqa: E402
from cannaspider.firecrawl import classify, profile  # noqa: E402
from cannaspider.firecrawl.batch import PageOutcome  # noqa: E402
from cannaspider.firecrawl.job import OnpageConfig  # noqa: E402
from cannaspider.project_settings import project_settings  # noqa: E402
from sandbox.websites import COMPETITOR_PAGES  # noqa: E402


def serp(lang: str) -> list[tuple[str, str, Any]]:
    """(url, rendered HTML, Firecrawl's metadata.language) of the locale's competitors."""
    pages: list[tuple[str, str, Any]] = [
        (f"https://guide.example/{lang}", COMPETITOR_PAGES[f"{lang}-guide.html"][1], None)
    ]
    pages += [(f"https://big{i}.example/{lang}", full_size_page(lang, i), None) for i in range(3)]
    if lang == "en":
        captured = json.loads((ROOT / "tests" / "fixtures" / "firecrawl-v2" / "03_get_completed.json").read_text())
        pages += [(d["metadata"]["sourceURL"], d["rawHtml"], d["metadata"].get("language")) for d in captured["data"]]
    return pages


LOCALES = {"fr": "fr-FR", "en": "en-US"}


def read_pages(specs: list[str]) -> list[tuple[str, str, Any]]:
    """(file:// URL, HTML, the LANG= prefix or None) of each `--page [LANG=]FILE`."""
    pages: list[tuple[str, str, Any]] = []
    for spec in specs:
        lang, sep, name = spec.partition("=")
        path = Path(name if sep else spec)
        if not path.is_file():
            sys.exit(f"--page {spec}: no such file")
        html = path.read_bytes().decode("utf-8", errors="replace")
        pages.append((path.resolve().as_uri(), html, lang if sep else None))
    return pages


def sort_pages(pages: list[tuple[str, str, Any]], config: OnpageConfig) -> dict[str, list[tuple[str, str, Any]]]:
    """The saved pages by the language the job's classifier gives them."""
    by_lang: dict[str, list[tuple[str, str, Any]]] = {}
    for url, html, language in pages:
        v = verdict(url, html, language, config)
        lang = v.corpus.lang if v.corpus is not None else None
        if v.corpus is None or lang not in LOCALES:
            print(f"--page {url}: {v.status}, language {lang!r}: in no SERP here ({', '.join(LOCALES)})")
            continue
        by_lang.setdefault(lang, []).append((url, html, language))
    return by_lang


def verdict(url: str, html: str, language: Any, config: OnpageConfig) -> classify.Verdict:
    doc = {"rawHtml": html, "metadata": {"statusCode": 200, "language": language}}
    return classify.classify(PageOutcome(url, doc=doc), min_words=config.min_words, limits=config.corpus)


def profiles(locale: str, pages: list[tuple[str, str, Any]], config: OnpageConfig) -> dict[bool, dict[str, Any]]:
    """{lemmas: the locale's profile}: counted by surface form (False) and by lemma (True)."""
    corpora = {}
    for url, html, language in pages:
        v = verdict(url, html, language, config)
        if v.corpus is not None:
            c = v.corpus
            corpora[url] = profile.ProfilePage(url, c.lang, c.title, c.text, [h.text for h in c.headings])
    competitors = [{"url": u, "position": i, "crawlStatus": "ok"} for i, (u, _, _) in enumerate(pages, 1)]
    return {
        lemmas: profile.compute(
            locale,
            competitors,
            corpora,
            min_pages=config.profile_min_pages,
            max_terms=config.profile_max_terms,
            lemmas=lemmas,
        )
        for lemmas in (False, True)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--page",
        action="append",
        default=[],
        metavar="[LANG=]FILE",
        help="a real page's saved HTML, added to the SERP of its language (repeatable)",
    )
    parser.add_argument("--pages-only", action="store_true", help="SERPs of the --page files alone")
    args = parser.parse_args()
    if args.pages_only and not args.page:
        parser.error("--pages-only needs --page")
    config = OnpageConfig.from_settings(project_settings())
    saved = sort_pages(read_pages(args.page), config)
    for lang, locale in LOCALES.items():
        if args.pages_only and not saved.get(lang):
            continue
        found = profiles(locale, ([] if args.pages_only else serp(lang)) + saved.get(lang, []), config)
        before, after = found[False]["terms"][: args.top], found[True]["terms"][: args.top]
        print(f"\n== {locale}: {found[True]['completeness']['ok']} pages; top {args.top} terms")
        for page in found[True]["pages"] if saved.get(lang) else []:
            flag = "  (other language: out of the weights)" if page["otherLanguage"] else ""
            print(f"  page {page['position']}: {page['url']} lang={page['lang']} tokens={page['tokens']}{flag}")
        head = f"{'weight':>9} {'pages':>5}"
        print(f"{'#':>3}  {'before (surface forms)':<36} {head}   {'after (by lemma)':<36} {head}  lemma: forms")
        for i in range(max(len(before), len(after))):
            b = before[i] if i < len(before) else None
            a = after[i] if i < len(after) else None
            left = f"{b['term']:<36} {b['weight']:>9.6f} {b['pages']:>5}" if b else " " * 52
            forms = f"{a['lemma']}: {' / '.join(a['forms'])}" if a else ""
            right = f"{a['term']:<36} {a['weight']:>9.6f} {a['pages']:>5}  {forms}" if a else ""
            print(f"{i + 1:>3}  {left}   {right}")
        merged = [t for t in found[True]["terms"] if len(t["forms"]) > 1]
        print(f"terms with several surface forms: {len(merged)} of {len(found[True]['terms'])}")


if __name__ == "__main__":
    main()
