"""A ledger's spend time against the number of spends already recorded, for every accounting.

Each accounting's ledger (a fresh file under a temporary directory) takes `--spends` Gaussian
spends one by one; the spend times around each checkpoint (the median of the five spends after
it) are printed with their ratio to the first checkpoint's. With `--against DIR` the same run
is made, in a subprocess, on the bayesdp source tree DIR (e.g. main's, extracted with
`git archive main src | tar -x -C /tmp/main`), and both are printed with the ratio of their
times at each checkpoint. Run:

    .venv/bin/python bench/ledger.py [--spends 2000] [--against /tmp/main/src]

Times are CPU times of the spending process (the wait for fsync is left out: it does not grow
with the history, and on a shared disk it is noise); compare the ratios printed in one run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ACCOUNTINGS = ("basic", "zcdp", "gdp", "advanced")
AROUND = 9  # spends timed after each checkpoint


def measure(spends: int, checkpoints: list[int]) -> dict[str, list[float]]:
    """Median spend CPU time (seconds) after each checkpoint, per accounting, with this bayesdp."""
    from bayesdp import Guarantee, Ledger
    from bayesdp.privacy import Noise

    noise = (Noise("gaussian", scale=1e4, sensitivity=1.0),)
    spend = Guarantee(1e-3, delta=1e-10, noise=noise)
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for accounting in ACCOUNTINGS:
            led = Ledger(Path(tmp) / f"{accounting}.db", budget=Guarantee(100.0, delta=1e-3),
                         accounting=accounting)
            times: list[float] = []
            for _ in range(spends + AROUND):
                t0 = time.process_time()
                led.spend(spend, "bench")
                times.append(time.process_time() - t0)
            led.close()
            out[accounting] = [statistics.median(times[c:c + AROUND]) for c in checkpoints]
    return out


def run_on(src: str, spends: int, checkpoints: list[int]) -> dict[str, list[float]]:
    """`measure` in a subprocess importing bayesdp from `src`."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"from ledger import measure; print(json.dumps(measure({spends}, {checkpoints!r})))")
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spends", type=int, default=2000)
    parser.add_argument("--against", help="another bayesdp source tree (its src/ directory)")
    args = parser.parse_args()
    checkpoints = sorted({c for c in (10, 100, 1000, args.spends) if c <= args.spends})
    here = str(Path(__file__).resolve().parents[1] / "src")
    runs = {"this": run_on(here, args.spends, checkpoints)}
    if args.against:
        runs["against"] = run_on(args.against, args.spends, checkpoints)
    print(f"# ledger spend CPU time (ms, median of {AROUND}) after n spends, "
          f"{datetime.date.today()}; against: {args.against or '-'}")
    print("accounting  n      this   /first" + ("   against  /first  against/this" if args.against else ""))
    for accounting in ACCOUNTINGS:
        mine = runs["this"][accounting]
        for i, n in enumerate(checkpoints):
            line = f"{accounting:<10}  {n:<5} {mine[i] * 1e3:7.2f}  {mine[i] / mine[0]:6.1f}"
            if args.against:
                theirs = runs["against"][accounting]
                line += (f"   {theirs[i] * 1e3:7.2f}  {theirs[i] / theirs[0]:6.1f}"
                         f"  {theirs[i] / mine[i]:8.1f}")
            print(line)


if __name__ == "__main__":
    main()
