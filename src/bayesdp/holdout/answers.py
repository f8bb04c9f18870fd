"""What a holdout releases: one frozen answer per query."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Literal

Source = Literal["train", "holdout", "exhausted"]


@dataclass(frozen=True)
class HoldoutAnswer:
    """A released answer: `value` (None when refused), where it came from, and the budget left after it.

    `source` is "train" (the training mean, the holdout agreed), "holdout" (the noisy holdout
    mean, one overflow spent) or "exhausted" (refused: no budget left). `budget_left` is None for
    a holdout without a budget (the naive baseline).
    """

    value: float | None
    _: KW_ONLY
    source: Source
    budget_left: int | None

    @property
    def exhausted(self) -> bool:
        return self.source == "exhausted"
