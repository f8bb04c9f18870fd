"""The dependence assumption of a guarantee: independent records (None), or a stated correlation model."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Literal, get_args

from bayesdp.errors import check_positive_int, invalid

Notion = Literal["pufferfish", "bdp"]
NOTIONS: tuple[str, ...] = get_args(Notion)
NOTION_NAMES = {"pufferfish": "Pufferfish privacy", "bdp": "Bayesian DP"}  # as printed


@dataclass(frozen=True)
class Dependence:
    """A guarantee that holds for records correlated as a model states (Song, Wang & Chaudhuri
    2017 for Pufferfish privacy; Yang, Sato & Nakagawa 2015 for Bayesian DP).

    `model` names the model in one sentence and `fingerprint` identifies its parameters, so
    guarantees under different models never compose; `length` is how many correlated records
    it covers (a sequence, a network, a holdout). `detail` says how the noise was calibrated
    and `explanation` what the guarantee promises and assumes: both are words, not part of
    equality.
    """

    notion: Notion
    _: KW_ONLY
    model: str
    fingerprint: str
    length: int
    detail: str = field(default="", compare=False)
    explanation: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.notion not in NOTIONS:
            raise invalid("notion", self.notion, f"one of {NOTIONS}")
        if not self.model or not self.fingerprint:
            raise invalid("model", self.model, "a non-empty description and fingerprint")
        object.__setattr__(self, "length", check_positive_int("length", self.length))

    def __str__(self) -> str:
        return f"{NOTION_NAMES[self.notion]} under {self.model}"
