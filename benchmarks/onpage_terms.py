"""The semantic profile's top terms, counted by surface form (before lemmas) and by lemma (now),
on the sandbox's French and English SERPs and the pages captured from a real self-hosted Firecrawl.

    python benchmarks/onpage_terms.py              # top 30 of each SERP, before and after
    python benchmarks/onpage_terms.py --top 10

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


def profiles(locale: str, pages: list[tuple[str, str, Any]], config: OnpageConfig) -> dict[bool, dict[str, Any]]:
    """{lemmas: the locale's profile}: counted by surface form (False) and by lemma (True)."""
    corpora = {}
    for url, html, language in pages:
        doc = {"rawHtml": html, "metadata": {"statusCode": 200, "language": language}}
        v = classify.classify(PageOutcome(url, doc=doc), min_words=config.min_words, limits=config.corpus)
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
    args = parser.parse_args()
    config = OnpageConfig.from_settings(project_settings())
    for locale in ("fr-FR", "en-US"):
        found = profiles(locale, serp(locale[:2]), config)
        before, after = found[False]["terms"][: args.top], found[True]["terms"][: args.top]
        print(f"\n== {locale}: {found[True]['completeness']['ok']} pages; top {args.top} terms")
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
