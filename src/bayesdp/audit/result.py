"""The verdict of an audit: a lower confidence bound on ε (and on δ at the claimed ε) and its witness."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any


@dataclass(frozen=True)
class AuditResult:
    """What the samples prove about a mechanism, at confidence `confidence`.

    With probability at least `confidence`, P[M(first) ∈ S] ≥ `probabilities[0]` and
    P[M(second) ∈ S] ≤ `probabilities[1]` for the witnessing event S, hence the true ε is at
    least `epsilon_lower` and the true δ at the claimed ε is at least `delta_lower` (both are
    reported as 0 when the samples prove nothing). `passed` is False when the bound exceeds
    the claim: ε for a pure claim (delta = 0), δ at the claimed ε otherwise.
    """

    epsilon: float
    _: KW_ONLY
    delta: float
    epsilon_lower: float
    delta_lower: float
    event: str
    first: Any = field(compare=False)
    second: Any = field(compare=False)
    counts: tuple[int, int]
    samples: int
    selection: int
    candidates: int
    probabilities: tuple[float, float]
    confidence: float
    passed: bool

    def __str__(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        conf = f"{100 * self.confidence:.6g}%"
        if self.delta == 0:
            claim = f"ε ≥ {_fmt(self.epsilon_lower)} (claimed ε = {self.epsilon:g})"
        else:
            claim = (
                f"δ ≥ {_fmt(self.delta_lower)} at ε = {self.epsilon:g} "
                f"(claimed δ = {self.delta:g}); ε ≥ {_fmt(self.epsilon_lower)}"
            )
        k1, k2 = self.counts
        return (
            f"{verdict}: with {conf} confidence {claim}.\n"
            f"Witness: the event '{self.event}' occurred {k1:,} times in {self.samples:,} runs "
            f"on {self.first!r} and {k2:,} times in {self.samples:,} runs on {self.second!r} "
            f"(probabilities ≥ {self.probabilities[0]:.6g} and ≤ {self.probabilities[1]:.6g}); "
            f"chosen among {self.candidates:,} events on {self.selection:,} separate runs "
            f"per input."
        )


def _fmt(x: float) -> str:
    return f"{x:.4g}"
