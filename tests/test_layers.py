"""The layers' import rules, kept by import-linter's contracts in pyproject.toml
([tool.importlinter]): imports run one way, webhooks/ → bot/ → memory/ → prompts/, and so do
the rooms inside bot/ and memory/ (worker → turn → llm → review | voice; jobs → store | queue →
recall | review → database), where only the composition root uses the OpenAI adapters; the
product never imports bench/, loopback/ or tests/; bench/ and loopback/ never import tests/ (nor
loopback/ bench/); and no package's modules import each other in a loop. Every import counts,
wherever it stands: at the top, inside a function (a lazy import still ties the modules
together) or under `if TYPE_CHECKING:` (a type is a dependency too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept() -> None:
    """Run as its own process, the way a developer runs `lint-imports`: in-process it would
    configure logging with `dictConfig`, which disables every logger that exists by then and
    leaves later tests' log capture empty."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "BROKEN" not in report and report.count("KEPT") == 8, report
