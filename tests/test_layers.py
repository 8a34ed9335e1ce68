"""The layers' import rules, kept by import-linter's contracts in pyproject.toml
([tool.importlinter]): imports run one way, webhooks/ → bot/ → memory/ → prompts/; the product
never imports bench/, loopback/ or tests/; bench/ and loopback/ never import tests/ (nor
loopback/ bench/); and no package's modules import each other in a loop. Every import counts,
wherever it stands: at the top, inside a function (a lazy import still ties the modules
together) or under `if TYPE_CHECKING:` (a type is a dependency too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_contract_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    finally:
        os.chdir(cwd)
    report = capsys.readouterr().out
    assert status == 0, report
    assert "BROKEN" not in report and report.count("KEPT") == 5, report
