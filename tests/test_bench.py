"""``floodgate bench --quick``: the JSON has every figure, and the figures are sane.

Speed is not judged here (the bench itself shows it against its targets); this checks that
the bench measures what it says it measures.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

DIST_KEYS = {"p50", "p95", "p99", "max", "n"}


def is_distribution(value: object, *, min_n: int = 1) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == DIST_KEYS
        and value["n"] >= min_n
        and all(not math.isnan(value[k]) for k in ("p50", "p95", "p99", "max"))
        and 0 <= value["p50"] <= value["p95"] <= value["p99"] <= value["max"]
    )


@pytest.mark.model
def test_quick_bench_writes_complete_sane_json(tmp_path: Path, model_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "bench",
            "--quick",
            "--model",
            str(model_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "| throughput.ratio |" in proc.stdout
    doc = json.loads(out.read_text())

    tp = doc["throughput"]
    assert tp["raw_tok_s"] > 0
    assert tp["app_tok_s"] > 0
    assert tp["ratio"] == pytest.approx(tp["pairs"][0], rel=1e-3)  # one pair in --quick
    for key in ("loop_lag_ms", "token_to_screen_ms", "frame_cost_ms"):
        assert is_distribution(doc[key]), key
    assert is_distribution(doc["stop_decode_ms"])
    assert is_distribution(doc["stop_prefill_ms"])
    assert doc["next_reply_consistent"] is True

    hose = doc["firehose"]
    assert hose["pieces_sent"] == 5000
    assert hose["lost"] == hose["pieces_sent"] - hose["pieces_shown"]
    assert hose["text_intact"] is True
    assert hose["queue_max"] <= hose["queue_bound"]
    assert 0 < hose["updates_per_s"] < 1000
    assert is_distribution(hose["loop_lag_ms"], min_n=50)

    long = doc["long_reply"]
    assert long["early_update_ms"] > 0
    assert long["ratio"] == pytest.approx(
        long["late_update_ms"] / long["early_update_ms"], rel=1e-2
    )
    assert long["markdown"] is True
    assert long["rows"] > 20  # the reply really was cut into many final blocks

    for name in ("per_piece_set_text", "per_piece_insert"):
        base = doc["baselines"][name]
        assert is_distribution(base["loop_lag_ms"])
        assert is_distribution(base["token_to_screen_ms"])
        assert base["firehose"]["lost"] >= 0
        assert is_distribution(base["firehose"]["loop_lag_ms"])

    remote = doc["remote"]
    assert remote["throughput"]["plain_tok_s"] > 0
    assert remote["throughput"]["app_tok_s"] > 0
    assert remote["throughput"]["ratio"] == pytest.approx(
        remote["throughput"]["pairs"][0], rel=1e-3
    )
    assert is_distribution(remote["stop_ms"], min_n=3)

    panel = doc["diagnostics_panel"]
    assert panel["tok_s_shown"] > 0
    assert panel["tok_s_hidden"] > 0
    assert doc["machine"]["cores"] == os.cpu_count()
    assert doc["machine"]["model"] == model_path.name
