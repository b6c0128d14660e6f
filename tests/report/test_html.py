"""`reports/index.html` in a real headless browser: every table there, every image decoded, no
console errors — and the page is one file (nothing fetched besides itself)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from browser import Browser, find_browser
from report_inputs import CURVE, VECTORS, render, report_dirs, vector_run, write_json

# CI installs Debian's chromium (.ci/run) and must run these; elsewhere they need one installed
pytestmark = pytest.mark.skipif(
    find_browser() is None and not os.environ.get("CI"),
    reason="no Chromium (apt-get install chromium)",
)

PAGE_FACTS = """JSON.stringify({
  tables: Array.from(document.querySelectorAll('table')).map(t => ({
    rows: t.querySelectorAll('tbody tr').length,
    head: Array.from(t.querySelectorAll('th')).map(th => th.textContent)})),
  images: Array.from(document.images).map(i => ({w: i.naturalWidth, h: i.naturalHeight,
                                                  done: i.complete, alt: i.alt})),
  cells: Array.from(document.querySelectorAll('td')).map(td => td.textContent),
  h2: Array.from(document.querySelectorAll('h2')).map(h => h.textContent),
  resources: performance.getEntriesByType('resource').map(r => r.name),
})"""


def _facts(browser: Browser, path) -> tuple[dict, list[str]]:
    page = browser.load(path)
    facts = json.loads(page.evaluate(PAGE_FACTS))
    return facts, page.errors


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def test_report_page_in_a_browser(tmp_path, browser):
    dirs = report_dirs(tmp_path)
    lm = {"task": "lm", "params": 10, "train_seconds": 1.0, "train_tokens_per_s": 1e4}
    write_json(
        dirs["metrics"] / "ngram.json",
        {**lm, "family": "ngram", "valid_ppl": 160.0, "test_ppl": 150.0},
    )
    write_json(
        dirs["metrics"] / "nnlm.json",
        {**lm, **VECTORS, "family": "nnlm", "valid_ppl": 130.0, "test_ppl": 120.0},
    )
    write_json(
        dirs["metrics"] / "attention.json",
        {"family": "attention", "task": "mt", "bleu": 20.0, "chrf": 45.0, "test_ppl": 8.0},
    )
    write_json(
        dirs["eval"] / "attention" / "samples.json",
        [{"source": "ein <b>hund</b> & katze", "reference": "a dog", "greedy": "a dog"}],
    )
    write_json(
        dirs["eval"] / "attention" / "attention.json",
        [
            {
                "source_tokens": ["▁ein", "▁hund"],
                "target_tokens": ["▁a", "▁dog"],
                "weights": np.eye(2).tolist(),
            }
        ],
    )
    for run in ("nnlm", "attention"):
        (dirs["plots"] / f"{run}.csv").write_text(CURVE)
    vector_run(dirs, "nnlm", 0)
    text = render(
        dirs, {"ngram": "ngram", "nnlm": "nnlm", "attention": "attention", "cbow": "word2vec"}
    )

    facts, errors = _facts(browser, dirs["reports"] / "index.html")
    assert errors == []
    md_tables = len(re.findall(r"^\|---", text, flags=re.M))
    # data, LM, vectors, neighbours, MT, samples, cost
    assert len(facts["tables"]) == md_tables >= 6
    assert all(t["rows"] > 0 and t["head"] for t in facts["tables"])
    figures = sorted(p.name for p in (dirs["reports"] / "figures").glob("*.png"))
    assert len(facts["images"]) == len(figures) >= 4  # projection, attention, 2 curve figures
    assert all(i["done"] and i["w"] > 0 and i["h"] > 0 for i in facts["images"]), facts["images"]
    assert facts["h2"][:5] == [
        "1. Language modelling",
        "2. Word vectors",
        "3. Translation",
        "4. Cost",
        "5. Learning curves",
    ]
    assert facts["h2"][-1] == "Missing or incomplete"
    assert facts["resources"] == []  # self-contained: the figures are inline
    assert "ein <b>hund</b> & katze" in facts["cells"]  # sample text shown as text, not markup


def test_the_check_sees_a_broken_page(tmp_path, browser):
    """The same checks fail on a page with a broken image and a console error."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><table><tr><th>a</th></tr></table>"
        '<img src="data:image/png;base64,AAAA"><script>console.error("boom")</script>'
        "</body></html>"
    )
    facts, errors = _facts(browser, page)
    assert any("boom" in e for e in errors)
    assert facts["images"][0]["w"] == 0
