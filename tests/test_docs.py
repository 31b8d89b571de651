"""Every ``python`` block in README.md and docs/*.md runs (a page's blocks share a namespace)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# ```python blocks run; a block fenced "```python no-run ..." (e.g. needing a cluster) does not.
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_docs_have_code() -> None:
    assert any(BLOCK.search(p.read_text()) for p in DOCS)


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_code_blocks_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # pages write ledger files: keep them out of the checkout
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a doc must not teach code that warns
        for i, block in enumerate(BLOCK.findall(page.read_text())):
            exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
