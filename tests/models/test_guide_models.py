"""The guide's models example runs as written, on a ledger shared with other releases."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

import bayesdp as bdp
from bayesdp.models import GaussianNB

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "models.md"


def models_example() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "LogisticRegression(" in b]
    assert len(blocks) == 1
    return str(blocks[0])


def test_the_guides_models_example_runs_on_an_add_remove_ledger(tmp_path: Path) -> None:
    gen = np.random.default_rng(0)
    x = gen.uniform(0, 1, (2400, 3))
    y = (x[:, 0] + 0.2 * gen.normal(size=2400) > 0.5).astype(int)
    ledger = bdp.Ledger(tmp_path / "budget.db", budget=bdp.Guarantee(4.0, delta=1e-6))
    ledger.spend(bdp.Guarantee(0.5), "an earlier count")  # the guide's ledger: add/remove
    scope: dict[str, Any] = {
        "bdp": bdp,
        "ledger": ledger,
        "X": x[:800], "y": y[:800], "X_new": x[:5],
        "X_train": x[:800], "y_train": y[:800],
        "X_valid": x[800:1600], "y_valid": y[800:1600],
        "X_hold": x[1600:], "y_hold": y[1600:],
        "other": GaussianNB(bounds=(0, 1), classes=[0, 1], epsilon=1.0, ledger=ledger),
    }
    exec(compile(models_example(), str(GUIDE), "exec"), scope)
    assert scope["clf"].guarantee.relation == "add_remove"
    assert [s.label for s in ledger.history()][:2] == ["an earlier count", "fit LogisticRegression"]
