"""What a guarantee means: semantic privacy (Kasiviswanathan & Smith, seed 000), tests, posteriors.

Seed 000 compares the adversary's posterior when the real data are used (b̄₀[·|t]) with the
posterior when record i is replaced by a default (b̄ᵢ[·|t]), for every prior: DP bounds that
posterior-to-posterior distance, whatever the side knowledge. It does not bound how far the
posterior moves from the prior, which a correlated prior can make large (the smoking example).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

import numpy as np

from bayesdp.errors import (
    DataError,
    check_delta,
    check_finite,
    check_open_unit,
    check_positive_int,
    invalid,
)
from bayesdp.privacy.noise import Noise


class StatedGuarantee(Protocol):
    """What the semantics read of a guarantee (`privacy.guarantee.Guarantee`, whose methods call
    these functions: a protocol here keeps the import one way)."""

    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def relation(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def dependence(self) -> Any: ...

# Tail mass beyond which bayes_check folds a discrete Laplace count into its end points.
TAIL = 1e-9
# Largest joint table bayes_check builds (databases × transcripts).
MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class SemanticPrivacy:
    """(ε, δ)-semantic privacy (KS Defs. 2.1, 2.3): SD(b̄₀[·|t], b̄ᵢ[·|t]) <= ε.

    With probability at least 1 − δ over the data and the transcript, for every prior and every
    i. `holds` says whether a theorem applies; when it does not, ε = δ = 1 (the trivial bound:
    no semantic guarantee follows) and `reason` says why.
    """

    epsilon: float
    _: KW_ONLY
    delta: float
    holds: bool
    reason: str

    @property
    def informative(self) -> bool:
        """True when the bound says something: it holds and ε < 1 and δ < 1 (SD is at most 1)."""
        return self.holds and self.epsilon < 1 and self.delta < 1


def _expm1(x: float) -> float:
    """e^x − 1, infinite instead of an overflow error for huge x."""
    return math.expm1(x) if x < 700 else math.inf


def ks_formula(epsilon: float, delta: float, n: int) -> tuple[float, float, bool]:
    """(ε', δ', precondition): KS Thm 2.2 (e^ε − 1, 0) or Thm 2.4 (e^{3ε} − 1 + 2√(nδ), 4√(nδ)).

    The raw formula: the numbers are a guarantee only when the precondition
    δ < (1 − e^{−ε})²/n holds; `semantic()` never reports them otherwise.
    """
    e = check_finite("epsilon", epsilon)
    d = check_delta("delta", delta)
    n = check_positive_int("n", n)
    if d == 0:
        return _expm1(e), 0.0, True
    r = math.sqrt(n * d)
    return _expm1(3 * e) + 2 * r, 4 * r, d < precondition_threshold(e, n)


def precondition_threshold(epsilon: float, n: int) -> float:
    """(1 − e^{−ε})²/n ≈ ε²/n: Thm 2.4 needs δ below it (Kasiviswanathan & Smith, Thm 2.4)."""
    return math.expm1(-epsilon) ** 2 / n


def semantic(g: StatedGuarantee, n: int) -> SemanticPrivacy:
    """Semantic privacy of `g` on databases of n rows (Kasiviswanathan & Smith, Thms 2.2, 2.4).

    KS's default record ⊥ is a removal under add/remove neighbours and a replacement under
    replace-one: either way the real and the ⊥ database are neighbours, so g's own ε, δ apply.
    """
    n = check_positive_int("n", n)
    e, d = g.epsilon, g.delta
    eps, dlt, ok = ks_formula(e, d, n)
    if not ok:
        thr = precondition_threshold(e, n)
        return SemanticPrivacy(
            1.0,
            delta=1.0,
            holds=False,
            reason=f"δ={d:.3g} is not below (1 − e^−ε)²/n = {thr:.3g} (ε={e:.3g}, n={n}): Theorem 2.4 "
            "does not apply and no semantic guarantee follows; δ must be far below ε²/n",
        )
    which = "Theorem 2.2 (ε-DP)" if d == 0 else "Theorem 2.4 ((ε, δ)-DP)"
    note = "" if eps < 1 and dlt < 1 else "; vacuous, since a statistical distance never exceeds 1"
    if not math.isfinite(eps):  # e^{3ε} overflowed: report the trivial bound, as when no theorem applies
        eps = 1.0
    return SemanticPrivacy(eps, delta=dlt, holds=True, reason=f"{which}: ε'={eps:.3g}, δ'={dlt:.3g}{note}")


def posterior(g: StatedGuarantee, prior: float) -> float:
    """Largest posterior from prior p: p·e^ε/(1 − p + p·e^ε) (Bayes' rule; Kazan & Reiter 2024).

    With δ > 0 the bound is not point-wise: it can fail on rare outputs. With 2ε in place of ε
    it holds except on outputs of total probability at most 2δ/(1 − e^{−ε}) (KS Lemma 3.3,
    part 2); see `rare_output_mass`.
    """
    return _posterior_bound(g.epsilon, check_open_unit("prior", prior))


def _posterior_bound(epsilon: float, p: float) -> float:
    """p·e^ε/(1 − p + p·e^ε) computed in logs: the ratio (1 − p)/p alone overflows for a
    subnormal prior (Bayes' rule)."""
    x = math.log1p(-p) - math.log(p) - epsilon
    return 1.0 / (1.0 + math.exp(x)) if x <= 0 else math.exp(-x) / (1.0 + math.exp(-x))


def rare_output_mass(g: StatedGuarantee) -> float:
    """2δ/(1 − e^{−ε}) bounds the mass of outputs with likelihood ratio > e^{2ε} (KS L. 3.3.2)."""
    if g.delta == 0:
        return 0.0
    if g.epsilon == 0:
        return math.inf
    return 2 * g.delta / -math.expm1(-g.epsilon)


def tradeoff(g: StatedGuarantee, alpha: float) -> float:
    """β(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)} (Kairouz, Oh & Viswanath 2015, Thm 2.1)."""
    a = check_finite("alpha", alpha)
    if not 0 <= a <= 1:
        raise invalid("alpha", alpha, "in [0, 1]")
    e, d = g.epsilon, g.delta
    return max(0.0, 1 - d - (_expm1(e) + 1) * a if a > 0 else 1 - d, math.exp(-e) * (1 - d - a))


def min_total_error(g: StatedGuarantee) -> float:
    """min over tests of α + β = 2(1 − δ)/(1 + e^ε) (Kairouz, Oh & Viswanath 2015, Thm 2.1)."""
    return 2 * (1 - g.delta) / (2 + _expm1(g.epsilon))


def explain(g: StatedGuarantee, n: int | None = None, prior: float | None = None) -> str:
    """A short paragraph for a data owner: what an adversary can and cannot conclude (seed 000)."""
    nn = None if n is None else check_positive_int("n", n)
    p = None if prior is None else check_open_unit("prior", prior)
    if g.dependence is not None:  # its own meaning, stated with the model it assumes
        return g.dependence.explanation or f"This release is {g}."
    e, d, unit = g.epsilon, g.delta, g.unit
    out = [f"This release is {g}."]
    out.append(_explain_pure(g) if d == 0 else _explain_delta(g, nn))
    caveat = ""
    if d > 0:
        mass = rare_output_mass(g)
        twice = _posterior_bound(2 * e, 0.5 if p is None else p)
        caveat = (
            " (with δ > 0 this can fail on rare outputs; with 2ε in place of ε, giving "
            f"{twice:.3g}{' for the 50% belief' if p is None else ''}, it holds except on "
            f"outputs of total probability at most 2δ/(1 − e^−ε) = {mass:.3g})"
            if mass < 1
            else " (with δ > 0 and this small an ε, nothing bounds how often it fails)"
        )
    if p is None:
        out.append(
            f"A yes/no fact about one {unit} believed with probability 50% beforehand can be "
            f"believed with at most {posterior(g, 0.5):.1%} afterwards, and a 1% belief can rise "
            f"to at most {posterior(g, 0.01):.2%}{caveat}."
        )
    else:
        out.append(
            f"A yes/no fact about one {unit} believed with probability {p:.3g} beforehand can be "
            f"believed with probability at most {posterior(g, p):.3g} afterwards{caveat}."
        )
    out.append(
        f"No test can tell whether a given {unit}'s data were used with type-I plus type-II "
        f"error below {min_total_error(g):.3g} (guessing gives 1). Nothing stops conclusions "
        f"that hold for the whole population from applying to that {unit}, whether or not "
        "they took part."
    )
    out.append(
        "Privacy loss adds up: this release together with earlier ones about the same people "
        "costs the sum of their ε and δ under basic composition (ten releases like this one: "
        f"ε={10 * e:.3g}{f', δ={10 * d:.3g}' if d else ''}; tighter accountants exist, and a "
        "Ledger keeps the total). Anything computed from the released numbers alone costs "
        "nothing more."
    )
    return " ".join(out)


def _explain_pure(g: StatedGuarantee) -> str:
    bar = _expm1(g.epsilon)
    if bar >= 1:
        return (
            f"At ε={g.epsilon:.3g} the semantic bound e^ε − 1 = {bar:.3g} is at least 1 and says "
            "nothing; the posterior and testing bounds below still do."
        )
    return (
        f"Whatever an adversary knew beforehand, what they conclude about any one {g.unit} is "
        f"nearly what they would conclude had that {g.unit}'s data been {_absent(g)}: the two "
        f"beliefs differ by at most e^ε − 1 = {bar:.3g} in statistical distance "
        "(Kasiviswanathan & Smith, Thm 2.2)."
    )


def _absent(g: StatedGuarantee) -> str:
    """KS's default record ⊥: removal under add/remove neighbours, a replacement otherwise."""
    return "left out" if g.relation == "add_remove" else "replaced by a default"


def _explain_delta(g: StatedGuarantee, n: int | None) -> str:
    e, d, unit = g.epsilon, g.delta, g.unit
    if n is None:
        cap = precondition_threshold(e, 1) / d
        reach = (
            f"for fewer than (1 − e^−ε)²/δ = {cap:.3g} privacy units (each one {unit}); pass n to check"
            if cap >= 1
            else "which holds for no number of records here"
        )
        return (
            f"Because δ={d:.3g} > 0 the guarantee may fail outright with probability about δ, "
            f"and it means something only if δ is far below ε²/n (Kasiviswanathan & Smith, "
            f"Thm 2.4): {reach}."
        )
    thr = precondition_threshold(e, n)
    sp = semantic(g, n)
    if not sp.holds:
        return (
            f"The rule δ ≪ ε²/n fails: for n={n}, δ={d:.3g} is not below (1 − e^−ε)²/n = "
            f"{thr:.3g}, so no semantic guarantee follows; a mechanism with these parameters "
            f"may publish about nδ = {n * d:.3g} records in the clear."
        )
    head = f"For n={n}, δ={d:.3g} is below (1 − e^−ε)²/n = {thr:.3g} (the rule δ ≪ ε²/n), so "
    if not sp.informative:
        # A statistical distance never exceeds 1: state the output-level bound instead,
        # TV <= (e^ε − 1 + 2δ)/(e^ε + 1) = 1 − min(α + β) (Kairouz, Oh & Viswanath 2015, Thm 2.1).
        return (
            head + "Kasiviswanathan & Smith's Thm 2.4 applies, but its bound on beliefs is at least 1 "
            f"here and says nothing; the output distributions with any one {unit}'s data used or "
            f"{_absent(g)} differ by at most (e^ε − 1 + 2δ)/(e^ε + 1) = {1 - min_total_error(g):.3g} "
            "in total variation (Kairouz, Oh & Viswanath 2015, Thm 2.1)."
        )
    return (
        head + f"whatever an adversary knew beforehand, with probability at least 1 − {sp.delta:.3g} "
        f"their beliefs about any one {unit} with that {unit}'s data used or {_absent(g)} "
        f"differ by at most {sp.epsilon:.3g} in statistical distance (Kasiviswanathan & Smith, Thm 2.4)."
    )


# -- the Bayesian adversary on small discrete worlds ----------------------------------------


@dataclass(frozen=True)
class BayesCheck:
    """Result of bayes_check: the largest SD(b̄₀[·|t], b̄ᵢ[·|t]) and where it is attained.

    `prior_shift` is the largest SD between the prior and the real-world posterior of one
    record's value (the prior-to-posterior change, which DP does not bound).
    """

    distance: float
    _: KW_ONLY
    record: int
    transcript: Any
    prior_shift: float


Pmf = Callable[[np.ndarray], np.ndarray]


def product_prior(marginals: Any) -> np.ndarray:
    """Joint prior over databases from one pmf per record: rows of `marginals`, independent."""
    m = np.asarray(marginals, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 1 or np.any(m < 0) or not np.allclose(m.sum(axis=1), 1.0):
        raise invalid("marginals", marginals, "a 2-d array whose rows are pmfs (one per record)")
    joint = m[0]
    for row in m[1:]:  # one step per record (n <= 8), not per database
        joint = np.multiply.outer(joint, row)
    return np.asarray(joint)


def bayes_check(
    mechanism: Any, records: Sequence[Any], prior: Any, *, default: Any = None
) -> BayesCheck:
    """Exact KS posteriors b̄₀[·|t] (real data), b̄ᵢ[·|t] (record i set to `default`) (seed 000, §2).

    `records` is the finite record domain; `prior` is a joint pmf over databases, an n-d array
    with every axis of length len(records) (n <= 8; product_prior builds independent ones).
    `mechanism` is a RandomizedResponse (transcripts: all response vectors), a DiscreteLaplace
    releasing the sum of the records (folded into its end points beyond tail mass 1e-9, which
    is post-processing), the Noise of either, or a callable mapping an (m, n) array of
    databases to an (m, T) array of output pmfs. A transcript possible in one world and
    impossible in the other counts as distance 1.
    """
    domain = list(records)
    size = len(domain)
    if size < 2:
        raise invalid("records", records, "a record domain with at least 2 values")
    b = np.asarray(prior, dtype=np.float64)
    n = b.ndim
    if not 1 <= n <= 8 or any(s != size for s in b.shape):
        raise invalid("prior", f"array of shape {b.shape}", f"an n-d array (n <= 8) of {size}s")
    if np.any(b < 0) or not math.isclose(float(b.sum()), 1.0, rel_tol=1e-9):
        raise invalid("prior", "array", "a pmf: non-negative and summing to 1")
    if default is None:
        default = domain[0]
    if default not in domain:
        raise invalid("default", default, f"one of the records {domain}")
    pmf, labels = _mechanism_pmf(mechanism, domain, n)
    index = np.indices(b.shape).reshape(n, -1).T  # every database, as record indices
    values = np.asarray(domain)[index]
    if index.shape[0] * len(labels) > MAX_CELLS:
        raise invalid("prior", f"{index.shape[0]} databases", "a smaller world")
    p_out = _checked_pmf(pmf(values), index.shape[0], len(labels))
    weights = b.ravel()
    post0, live0 = _posterior(p_out, weights)
    best = (-1.0, 0, 0)
    for i in range(n):  # one pass per record position (n <= 8)
        moved = index.copy()
        moved[:, i] = domain.index(default)
        post_i, live_i = _posterior(p_out[np.ravel_multi_index(moved.T, b.shape)], weights)
        sd = 0.5 * np.abs(post0 - post_i).sum(axis=0)
        sd = np.where(live0 & live_i, sd, np.where(live0 | live_i, 1.0, 0.0))
        t = int(np.argmax(sd))
        if sd[t] > best[0]:
            best = (float(sd[t]), i, t)
    return BayesCheck(best[0], record=best[1], transcript=labels[best[2]],
                      prior_shift=_prior_shift(b, post0, live0))


def _posterior(p_out: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bayes: columns of P(t | x)·b[x], normalised over x (zero where t is impossible)."""
    joint = p_out * weights[:, None]
    total = joint.sum(axis=0)
    live = total > 0
    return joint / np.where(live, total, 1.0), live


def _prior_shift(b: np.ndarray, post0: np.ndarray, live: np.ndarray) -> float:
    """max over i, t of SD(prior of x_i, posterior of x_i given t in the real world)."""
    n, shape = b.ndim, b.shape
    post = post0[:, live].reshape(*shape, -1)
    worst = 0.0
    for i in range(n):  # one pass per record position (n <= 8)
        others = tuple(j for j in range(n) if j != i)
        prior_i = b.sum(axis=others)
        post_i = post.sum(axis=others)
        worst = max(worst, float((0.5 * np.abs(post_i - prior_i[:, None]).sum(axis=0)).max()))
    return worst


def _checked_pmf(p: Any, rows: int, cols: int) -> np.ndarray:
    out = np.asarray(p, dtype=np.float64)
    if out.shape != (rows, cols):
        raise DataError(f"the mechanism's pmf has shape {out.shape}; expected ({rows}, {cols})")
    if np.any(out < 0) or not np.allclose(out.sum(axis=1), 1.0, rtol=0, atol=1e-9):
        raise DataError("the mechanism's pmf rows must be non-negative and sum to 1")
    return out


def _mechanism_pmf(mechanism: Any, domain: list[Any], n: int) -> tuple[Pmf, list[Any]]:
    """The output pmf on databases and the transcript labels, for the mechanisms we can compute."""
    noise = mechanism if isinstance(mechanism, Noise) else getattr(mechanism, "noise", None)
    if isinstance(noise, Noise) and noise.family == "randomized_response":
        return _rr_pmf(noise.epsilon, noise.categories, domain, n)
    if isinstance(noise, Noise) and noise.family == "discrete_laplace":
        return _dlap_count_pmf(noise.scale, noise.sensitivity, domain, n)
    if noise is None and callable(mechanism):
        probe = np.asarray(mechanism(np.asarray([[domain[0]] * n])))
        labels = list(range(probe.shape[-1])) if probe.ndim == 2 else []
        return mechanism, labels
    raise invalid(
        "mechanism",
        mechanism,
        "RandomizedResponse, DiscreteLaplace, or a callable returning output pmfs",
    )


def _rr_pmf(epsilon: float, k: int, domain: list[Any], n: int) -> tuple[Pmf, list[Any]]:
    """k-ary randomized response on each record: truth w.p. e^ε/(e^ε + k − 1) (seed 003, Ex. 1)."""
    if domain != list(range(k)):
        raise invalid("records", domain, f"the categories 0..{k - 1} of the mechanism")
    outs = np.indices((k,) * n).reshape(n, -1).T  # every response vector
    truth = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    other = 1.0 / (math.exp(epsilon) + k - 1)

    def pmf(databases: np.ndarray) -> np.ndarray:
        x = databases.astype(np.int64)
        kept = (x[:, None, :] == outs[None, :, :]).sum(axis=2)  # reports equal to the truth
        return np.asarray(truth**kept * other ** (n - kept))

    return pmf, [tuple(int(v) for v in row) for row in outs]


def _dlap_count_pmf(
    scale: float, sensitivity: float, domain: list[Any], n: int
) -> tuple[Pmf, list[Any]]:
    """Sum of the records plus discrete Laplace noise, P(z) ∝ e^{−|z|/scale} (CKS 2020, Def. 2)."""
    vals = np.asarray(domain, dtype=np.float64)
    if not np.all(vals == np.rint(vals)) or float(vals.max() - vals.min()) > sensitivity:
        raise invalid(
            "records", domain, f"integers within a range of the sensitivity {sensitivity:g}"
        )
    q = math.exp(-1.0 / scale)
    width = max(1, math.ceil(math.log(TAIL) / math.log(q)))
    lo = int(vals.min()) * n - width
    hi = int(vals.max()) * n + width
    support = np.arange(lo, hi + 1)

    def pmf(databases: np.ndarray) -> np.ndarray:
        s = databases.astype(np.float64).sum(axis=1).astype(np.int64)
        z = support[None, :] - s[:, None]
        p = (1 - q) / (1 + q) * q ** np.abs(z).astype(np.float64)
        p[:, 0] = q ** (s - lo).astype(np.float64) / (1 + q)  # P(Z <= lo − s), folded
        p[:, -1] = q ** (hi - s).astype(np.float64) / (1 + q)  # P(Z >= hi − s), folded
        return np.asarray(p)

    return pmf, [int(v) for v in support]
