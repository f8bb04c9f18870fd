"""audit and audit_pairs: search an event on one split of samples, bound ε and δ on a fresh split.

The procedure of StatDP (Ding et al. CCS 2018) and DP-Sniper (Bichsel et al. S&P 2021):
the event and its orientation are fixed on `selection` runs per input (half of them shape the
candidate events, the other half score them), then counted on
`samples` fresh runs per input, so the Clopper–Pearson bounds hold at the stated confidence
whatever the search did (no multiple-comparison correction is needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesdp.audit import bounds
from bayesdp.audit.events import Event, Family, auto_families, lattice_event, single
from bayesdp.audit.result import AuditResult
from bayesdp.audit.sources import (
    Reachability,
    Sampler,
    as_sampler,
    declared_grid,
    declared_reachability,
    draw,
)
from bayesdp.errors import (
    check_delta,
    check_nonnegative,
    check_open_unit,
    check_positive_int,
    invalid,
)
from bayesdp.noise import Rng, resolve_rng

Progress = Callable[[int, int], None]
CHUNK = 1_000_000  # runs drawn per call of the mechanism in the test split
_MIN_SELECTION = 10_000


@dataclass(frozen=True)
class _Choice:
    score: float
    pair: int
    event: Event
    swap: bool
    candidates: int


def audit(
    mechanism: Any,
    d0: Any,
    d1: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 1_000_000,
    alpha: float = 0.05,
    events: str | Sequence[Event] = "auto",
    rng: Rng | None = None,
    selection: int | None = None,
    grid: float | None = None,
    reachable: Reachability | None = None,
    progress: Progress | None = None,
) -> AuditResult:
    """Lower confidence bound on the ε (and the δ at `epsilon`) of `mechanism` on neighbours d0, d1.

    `mechanism` is a callable (input, size, rng) -> array with one output per run, or a bayesdp
    mechanism object (run as `release(np.full(size, input), rng=rng)`). `events` is "auto"
    (thresholds, intervals, point masses, float structure) or a sequence of `Event`; a single
    given event on a single pair skips the search and is tested as more likely under d0. `grid`
    declares the lattice all outputs lie on and `reachable` the known inverse of a float
    sampler (default: the mechanism's own `grid` / `reachable` attributes). `selection` runs
    per input choose the event (default max(samples/10, 10,000)), `samples` fresh runs per
    input test it. `rng=None` uses secure randomness; a seeded generator makes it repeatable.
    """
    return audit_pairs(
        mechanism,
        [(d0, d1)],
        epsilon=epsilon,
        delta=delta,
        samples=samples,
        alpha=alpha,
        events=events,
        rng=rng,
        selection=selection,
        grid=grid,
        reachable=reachable,
        progress=progress,
    )


def audit_pairs(
    mechanism: Any,
    pairs: Sequence[tuple[Any, Any]],
    *,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 1_000_000,
    alpha: float = 0.05,
    events: str | Sequence[Event] = "auto",
    rng: Rng | None = None,
    selection: int | None = None,
    grid: float | None = None,
    reachable: Reachability | None = None,
    progress: Progress | None = None,
) -> AuditResult:
    """Audit several neighbour pairs (boundary cases, empty vs one record) and report the worst.

    The pair and the event are chosen together on the selection runs, and only that choice is
    tested on fresh runs, so the confidence stays 1 - α however many pairs are searched.
    Arguments as for `audit`.
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    delta = check_delta("delta", delta)
    samples = check_positive_int("samples", samples)
    alpha = check_open_unit("alpha", alpha)
    pairs = list(pairs)
    if not pairs or any(not isinstance(p, tuple | list) or len(p) != 2 for p in pairs):
        raise invalid("pairs", pairs, "a non-empty sequence of (d0, d1) neighbour pairs")
    given = _given_events(events)
    if selection is None:
        selection = max(samples // 10, min(samples, _MIN_SELECTION))
    selection = check_positive_int("selection", selection)
    if selection < 2:
        raise invalid("selection", selection, "at least 2 runs per input (half build, half score)")
    sampler = as_sampler(mechanism)
    lattice = declared_grid(mechanism, grid)
    inverse = declared_reachability(mechanism, reachable)
    gen = resolve_rng(rng)
    searched = given is None or len(given) > 1 or len(pairs) > 1
    total = 2 * samples + (2 * selection * len(pairs) if searched else 0)
    meter = _Meter(progress, total)

    if searched:
        choice = _select(sampler, pairs, selection, given, lattice, inverse, gen, meter,
                         epsilon, delta, alpha)
    else:
        assert given is not None
        choice = _Choice(-math.inf, 0, given[0], False, 1)
        selection = 0
    first, second = pairs[choice.pair][::-1] if choice.swap else pairs[choice.pair]
    k1 = _count(sampler, first, choice.event, samples, gen, meter)
    k2 = _count(sampler, second, choice.event, samples, gen, meter)
    hits1, hits2 = np.array([k1]), np.array([k2])
    eps_lb = float(bounds.epsilon_lower(hits1, hits2, samples, samples, alpha)[0])
    delta_lb = float(bounds.delta_lower(hits1, hits2, samples, samples, epsilon, alpha)[0])
    eps_lb, delta_lb = max(eps_lb, 0.0), max(delta_lb, 0.0)
    passed = eps_lb <= epsilon if delta == 0 else delta_lb <= delta
    return AuditResult(
        epsilon=epsilon,
        delta=delta,
        epsilon_lower=eps_lb,
        delta_lower=delta_lb,
        event=choice.event.description,
        first=first,
        second=second,
        counts=(k1, k2),
        samples=samples,
        selection=selection,
        candidates=choice.candidates,
        probabilities=(
            float(bounds.cp_lower(hits1, float(samples), alpha / 2)[0]),
            float(bounds.cp_upper(hits2, float(samples), alpha / 2)[0]),
        ),
        confidence=1.0 - alpha,
        passed=passed,
    )


def _given_events(events: str | Sequence[Event]) -> list[Event] | None:
    if isinstance(events, str):
        if events != "auto":
            raise invalid("events", events, '"auto" or a non-empty sequence of Event')
        return None
    chosen = list(events)
    if not chosen or not all(isinstance(e, Event) for e in chosen):
        raise invalid("events", events, '"auto" or a non-empty sequence of Event')
    return chosen


class _Meter:
    """Reports runs drawn so far to the caller's progress callback."""

    def __init__(self, callback: Progress | None, total: int) -> None:
        self.callback, self.total, self.done = callback, total, 0

    def add(self, runs: int) -> None:
        self.done += runs
        if self.callback is not None:
            self.callback(self.done, self.total)


def _select(
    sampler: Sampler,
    pairs: list[tuple[Any, Any]],
    selection: int,
    given: list[Event] | None,
    lattice: float | None,
    inverse: Reachability | None,
    gen: Rng,
    meter: _Meter,
    epsilon: float,
    delta: float,
    alpha: float,
) -> _Choice:
    """The (pair, event, orientation) with the best bound on the selection runs."""
    best: _Choice | None = None
    examined = 0
    for index, (a, b) in enumerate(pairs):
        x0 = draw(sampler, a, selection, gen)
        x1 = draw(sampler, b, selection, gen)
        meter.add(2 * selection)
        half = selection // 2  # shape the events on the first half, score them on the second
        s0, s1 = x0[half:], x1[half:]
        if given is not None:
            families = [single(e, s0, s1) for e in given]
        else:
            families = auto_families(x0[:half], x1[:half], s0, s1)
            families += [single(e, s0, s1) for e in _structural(x0, a, b, lattice, inverse)]
        c0 = np.concatenate([f.counts0 for f in families])
        c1 = np.concatenate([f.counts1 for f in families])
        examined += 2 * c0.size
        forward = _score(c0, c1, s0.shape[0], epsilon, delta, alpha)
        backward = _score(c1, c0, s0.shape[0], epsilon, delta, alpha)
        swap = bool(backward.max() > forward.max())
        scores = backward if swap else forward
        m = int(np.argmax(scores))
        if best is None or scores[m] > best.score:
            best = _Choice(float(scores[m]), index, _locate(families, m), swap, 0)
    assert best is not None
    return _Choice(best.score, best.pair, best.event, best.swap, examined)


def _score(
    k1: np.ndarray, k2: np.ndarray, n: int, epsilon: float, delta: float, alpha: float
) -> np.ndarray:
    """The bound each event would give at the selection size: ε for pure claims, else δ at ε."""
    if delta == 0:
        return bounds.epsilon_lower(k1, k2, n, n, alpha)
    return bounds.delta_lower(k1, k2, n, n, epsilon, alpha)


def _locate(families: list[Family], m: int) -> Event:
    for family in families:
        if m < family.size:
            return family.build(m)
        m -= family.size
    raise IndexError(m)


def _structural(
    x0: np.ndarray, a: Any, b: Any, lattice: float | None, inverse: Reachability | None
) -> list[Event]:
    """Events that hold with probability 0 for a correct float mechanism (Mironov 2012)."""
    columns = [None] if x0.ndim == 1 else list(range(x0.shape[1]))
    found: list[Event] = []
    for j in columns:
        if lattice is not None:
            found.append(lattice_event(lattice, j))
        if inverse is not None:
            found += [_unreachable(inverse, source, j) for source in (a, b)]
    return found


def _unreachable(inverse: Reachability, source: Any, j: int | None) -> Event:
    """Outputs the sampler cannot produce from `source` (entry j of a vector input for column j)."""
    loc = source if j is None or np.ndim(source) == 0 else np.asarray(source)[j]

    def contains(out: np.ndarray) -> np.ndarray:
        values = out if j is None else out[:, j]
        return ~inverse.reachable(values, loc)

    name = "output" if j is None else f"output[{j}]"
    return Event(f"{name} cannot be produced from input {loc!r} by {inverse.description}",
                 contains=contains)


def _count(sampler: Sampler, x: Any, event: Event, samples: int, gen: Rng, meter: _Meter) -> int:
    """Hits of the event in `samples` fresh runs on x, drawn in chunks of CHUNK runs."""
    hits = 0
    for start in range(0, samples, CHUNK):
        size = min(CHUNK, samples - start)
        hits += event.count(draw(sampler, x, size, gen))
        meter.add(size)
    return hits
