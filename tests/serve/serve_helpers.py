"""Helpers for the service tests: a real server (uvicorn in a subprocess on 127.0.0.1, a free port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

from bayesdp.serve.config import Config, load_config
from bayesdp.serve.state import State

START_TIMEOUT_S = 60.0

CONFIG = """
state = "state"
max_body_bytes = 1_000_000
rate_per_minute = {rate}
timing = {{ pad = false }}  # answers as soon as they are ready: test_serve_timing.py times them

[datasets.visits]
source = "visits.csv"
privacy_unit = "user"
unit_name = "user"
description = "synthetic test visits"
max_groups_per_unit = 2
max_rows_per_group = 2
budget = {{ epsilon = 3.0, delta = 1e-6 }}
[datasets.visits.columns]
shop = {{ domain = ["a", "b", "c"] }}
spend = {{ bounds = [0, 10] }}
flag = {{ bounds = [0, 1] }}

[datasets.people]
source = "people.csv"
privacy_unit = false
budget = {{ epsilon = 3.0, delta = 1e-6 }}
synthetic = {{ epsilon = 1.0, delta = 1e-7, rows = 300 }}
[datasets.people.columns]
shop = {{ domain = ["a", "b", "c"] }}
spend = {{ bounds = [0, 10] }}

[datasets.gaps]
source = "gaps.csv"
privacy_unit = "user"
max_groups_per_unit = 3
budget = {{ epsilon = 3.0, delta = 1e-6 }}
[datasets.gaps.columns]
shop = {{ domain = ["a", "b", "c"] }}
spend = {{ bounds = [0, 10] }}

[holdouts.model]
train = "train.csv"
holdout = "holdout.csv"
threshold = 0.04
sigma = 0.01
budget = 5
"""


def write_service(root: Path, rate: int = 6000) -> Path:
    """The test service's data files and configuration under `root`; returns the config path."""
    rng = np.random.default_rng(7)
    n = 3000
    visits = pd.DataFrame({"user": rng.integers(0, 800, n), "shop": rng.choice(["a", "b", "c"], n),
                           "spend": rng.uniform(0, 12, n), "flag": rng.integers(0, 2, n),
                           "secret": rng.integers(0, 10**9, n)})
    visits.to_csv(root / "visits.csv", index=False)
    gaps = visits.head(100).astype({"user": "float64"})
    gaps.loc[[3, 30, 60], "user"] = None  # three rows belong to nobody
    gaps.to_csv(root / "gaps.csv", index=False)
    people = visits.drop_duplicates("user")[["shop", "spend"]]
    people.to_csv(root / "people.csv", index=False)
    half = len(people) // 2
    people.iloc[:half].to_csv(root / "train.csv", index=False)
    people.iloc[half:].to_csv(root / "holdout.csv", index=False)
    path = root / "service.toml"
    path.write_text(CONFIG.format(rate=rate))
    return path


@dataclass
class Server:
    """A running `bayesdp serve` process."""

    config_path: Path
    process: subprocess.Popen[str]
    url: str

    @property
    def config(self) -> Config:
        return load_config(self.config_path)

    def client(self, token: str | None = None, timeout: float = 60.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """Start `bayesdp serve ARGS` and return it with its stdout lines up to the URL (and token)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    with open(cwd / "server.log", "a") as log:  # the server's log: traces go there, not to clients
        process = subprocess.Popen([sys.executable, "-m", "bayesdp", "serve", *args, "--port", "0"],
                                   cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if (line.startswith("URL: ") and "--demo" not in args) or line.startswith("Token: "):
            break
    url = next((ln[5:] for ln in lines if ln.startswith("URL: ")), None)
    if url is None:
        process.kill()
        raise AssertionError(f"the server did not start: {lines}")
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "health", timeout=2).status_code == 200:
                return process, lines
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not answer /health")


def serve(config_path: Path) -> Server:
    process, lines = start(["--config", str(config_path)], config_path.parent)
    return Server(config_path, process, lines[-1][5:])


def add_analyst(config_path: Path, name: str) -> str:
    state = State(load_config(config_path))
    try:
        return state.add_analyst(name)
    finally:
        state.close()
