"""The docs site builds with `mkdocs build --strict` (a broken link, a missing page or a
setting without a description fails it), and the README's links and pictures lead somewhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from webhooks.settings import env_names

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_with_every_setting_in_its_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reference = (site / "configuration" / "index.html").read_text()
    missing = [name for name in env_names() if name not in reference]
    assert not missing, f"the configuration reference lacks {missing}"
    assert (site / "bench" / "results" / "tokens.png").is_file()


def test_the_readme_is_short_and_its_links_exist() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(((?!https?://)[^)#\s]+)\)", text)
    assert targets, "the README links into the docs"
    # Its pictures too, which are HTML where they need a width.
    targets += re.findall(r'(?:src|href)="((?!https?://)[^"#]+)"', text)
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, missing
