"""Adaptive model selection on a reused holdout: the naive holdout overfits, Thresholdout does not.

The data carry no signal: labels are coin flips independent of every feature, so no model
beats 50% on fresh data. An analyst grows a logistic regression greedily: each round proposes
`--candidates` models (the current features plus one new one) and keeps the one with the best
holdout accuracy, through `bayesdp.models.select` (fit on half the training set; the other half
is Thresholdout's validation side), then asks the holdout for the chosen model's accuracy.
Reusing a plain holdout this way makes the reported accuracy climb well above 50% (the holdout
is overfit, as in Dwork et al., Science 2015, Fig. 1; seed 002); scored through a
ReusableHoldout it stays near the fresh accuracy.

    python examples/model_selection.py                 # 1,000 rows per set, 5 repetitions
    python examples/model_selection.py --reps 20 --n 2000

With the defaults (5 repetitions, about 10 minutes on a loaded 2-core machine) the naive
holdout's reported accuracy climbed from 0.532 to 0.567 over 10 rounds while fresh accuracy
stayed at 0.50-0.51; the reusable holdout's stayed between 0.519 and 0.555 without climbing
(0.519 at round 10, fresh 0.492): Thresholdout keeps each answer within about its threshold
plus noise (here 0.016 + 0.008) of the holdout. That costs privacy on the holdout: every
answer that comes from the holdout is paid, about ε = 70-170 per run at this small noise.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from bayesdp import ReusableHoldout, rng_for_tests
from bayesdp.holdout import NaiveHoldout
from bayesdp.models import Labelled, select


def columns(cols: list[int]) -> FunctionTransformer:
    return FunctionTransformer(lambda x, c=tuple(cols): x[:, list(c)])


def run(
    holdout_kind: str, x: np.ndarray, y: np.ndarray, args: argparse.Namespace, rng: np.random.Generator
) -> np.ndarray:
    """Reported and fresh accuracy of the chosen model after each round, shape (rounds, 2)."""
    n = args.n
    (xt, xh, xf), (yt, yh, yf) = np.split(x, 3), np.split(y, 3)
    # The training set's first half fits the models; its second half is the validation side that
    # Thresholdout compares with the holdout (rows a model was fit on would score too high).
    half = n // 2
    valid, hold = Labelled(xt[half:], y=yt[half:]), Labelled(xh, y=yh)
    if holdout_kind == "naive":
        holdout: ReusableHoldout | NaiveHoldout = NaiveHoldout(valid, holdout=hold)
    else:
        noise = 0.25 / math.sqrt(n)
        holdout = ReusableHoldout(
            valid,
            holdout=hold,
            threshold=0.5 / math.sqrt(n),
            sigma=noise,
            threshold_noise=noise,
            compare_noise=noise,
            budget=args.rounds * (args.candidates + 1),
            rng=rng,
        )
    chosen: list[int] = []
    out = []
    for _ in range(args.rounds):
        pool = rng.choice([j for j in range(x.shape[1]) if j not in chosen], args.candidates, replace=False)
        models = [make_pipeline(columns([*chosen, int(j)]), LogisticRegression()) for j in pool]
        result = select(models, xt[:half], yt[:half], holdout=holdout)
        chosen.append(int(pool[result.index]))
        # Report the chosen model's accuracy by one more query (the best of many noisy answers
        # is biased upward by the choice itself).
        model = result.model
        reported = holdout.query(lambda d, m=model: m.predict(d.X) == d.y)
        out.append((reported.value, float(np.mean(model.predict(xf) == yf))))
    if isinstance(holdout, ReusableHoldout):
        print(f"    Thresholdout guarantee on the holdout after the run: {holdout.guarantee}")
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="rows in each of train, holdout and fresh")
    parser.add_argument("--d", type=int, default=200, help="features (all noise)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=50, help="models compared per round")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2015, help="seed: repeatable, NOT private")
    args = parser.parse_args()
    rng = rng_for_tests(args.seed)
    results: dict[str, list[np.ndarray]] = {"naive": [], "reusable": []}
    for rep in range(args.reps):
        x = rng.standard_normal((3 * args.n, args.d))
        y = rng.integers(0, 2, 3 * args.n)
        for kind in results:
            print(f"repetition {rep + 1}, {kind} holdout")
            results[kind].append(run(kind, x, y, args, rng))
    print("\nmean accuracy of the chosen model after each round: reported holdout / fresh data")
    print(f"{'round':>5}  {'naive holdout':>17}  {'reusable holdout':>17}")
    naive, reusable = (np.mean(results[k], axis=0) for k in ("naive", "reusable"))
    for r in range(args.rounds):
        print(
            f"{r + 1:>5}  {naive[r, 0]:.3f} / {naive[r, 1]:.3f}    "
            f"{reusable[r, 0]:.3f} / {reusable[r, 1]:.3f}"
        )


if __name__ == "__main__":
    main()
