"""The trading experiment's program (examples/trading/trading.py) end to end
in its tiny --smoke configuration, on the CPU through the interpreter:
it trains both attention paths, evaluates them walk-forward and runs the
precision check.  Skipped without torch; the real run needs a GPU
(examples/trading/run.sh)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HAVE_TORCH

TOP = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_smoke_run(tmp_path):
    out = tmp_path / "smoke.json"
    env = dict(os.environ, PYTHONPATH=str(TOP / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(TOP / "examples/trading/trading.py"), "--smoke", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(out.read_text())
    runs = {(x["N"], x["attention"]): x for x in doc["results"]}
    assert set(runs) == {(32, "fadsl"), (32, "explicit"), (96, "fadsl"), (96, "explicit")}
    for rec in runs.values():
        fold = rec["folds"][0]
        assert "failed" not in fold and len(fold["epochs"]) == 1
        assert 0 <= fold["out_of_sample"]["accuracy"] <= 1
    check = runs[(96, "fadsl")]["precision_check"]
    assert len(check["layers"]) == 2 and check["labels_compared"] > 0
    # bf16 attention against float64 on the same inputs: small, and not zero
    assert all(0 < l["frobenius_relative_error"] < 2e-2 for l in check["layers"])
    assert 0 <= check["label_flip_fraction"] <= 1
    assert (tmp_path / "smoke.md").read_text().startswith("| N | attention |")
