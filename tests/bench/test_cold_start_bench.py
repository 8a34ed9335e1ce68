"""The cold-start benchmark's round, once: every figure is measured (the processes started,
the web answered, the worker replied and drew the chart), none is made up."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.cold_start import one_round

pytestmark = pytest.mark.slow


def test_one_round_measures_every_figure(tmp_path: Path) -> None:
    figures = one_round(tmp_path)
    assert set(figures) == {
        "help_wall_s",
        "help_cpu_s",
        "web_first_healthz_s",
        "worker_first_reply_s",
        "progress_photo_s",
        "next_reply_s",
        "renderer_load_ms",
        "render_ms",
        "render_cpu_ms",
    }
    # The last three are read from the worker's log lines: NaN had it drawn no chart.
    assert all(math.isfinite(value) and value > 0 for value in figures.values()), figures
