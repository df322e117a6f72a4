"""The Python API names its two score scales (issue 32): the README's example searches with ``floor=0.3``,
a cosine, and what it prints says which number is the cosine and which the fused rank score (~0.03)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return next(b for b in blocks if "bara.retriever.search" in b)


def test_the_readme_example_prints_each_score_by_name(tmp_path, monkeypatch, capsys, data_dir):
    (tmp_path / "docs").mkdir()
    shutil.copy(data_dir / "rfc" / "rfc6797.txt", tmp_path / "docs" / "rfc6797.txt")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    example = _readme_example()
    floor = float(re.search(r"floor=([0-9.]+)", example).group(1))
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)  # noqa: S102 - the documented example, as a user runs it
    printed = capsys.readouterr().out
    outcome = scope["outcome"]
    assert outcome.hits, printed
    for hit in outcome.hits:
        assert hit.cosine == hit.similarity >= floor  # the floor compares the cosine...
        assert f"cosine={hit.cosine:.3f}" in printed and f"fused={hit.fused:.4f}" in printed
        assert hit.fused < floor  # ...not the fused score, a different scale the printout names apart
    assert all(h.cosine < floor for h in outcome.dropped)
    assert "§" in printed and hit.chunk.text not in printed  # where the hit is from, not its whole text
