"""Randomness and exact vectorized samplers (private in floating point)."""

from bayesdp.noise.lattice import GRID_BITS, grid_for, snap, snap_add, unsnap
from bayesdp.noise.random import Rng, resolve_rng, rng_for_tests, secure_rng
from bayesdp.noise.samplers import bernoulli_exp, discrete_gaussian, discrete_laplace

__all__ = [
    "GRID_BITS",
    "Rng",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "grid_for",
    "resolve_rng",
    "rng_for_tests",
    "secure_rng",
    "snap",
    "snap_add",
    "unsnap",
]
