"""A scikit-learn Pipeline whose steps pass their public row-norm bound on and whose guarantees compose."""

from __future__ import annotations

import warnings
from typing import Any

import sklearn.pipeline

from bayesdp.errors import InvalidParameter
from bayesdp.privacy import Guarantee


class ClippingWarning(UserWarning):
    """Rows may exceed an estimator's `data_norm` and be clipped to it, which biases the model."""


class Pipeline(sklearn.pipeline.Pipeline):
    """scikit-learn's Pipeline, with the row-norm bound of a private transformer handed to the next step.

    A fitted bayesdp transformer states `norm_bound_`, the largest L2 norm its output rows can
    have, computed from public bounds and its released statistics only (post-processing, no
    spend). Before the final estimator is fitted, its `data_norm` is set to that bound when it is
    None, and a ClippingWarning is raised when a given `data_norm` is below it (rows may then be
    clipped). The warning is decided from these public figures only, never from the rows, so it
    reveals nothing about any one of them. `guarantee` is the basic composition of the steps'
    guarantees (every step reads the same rows: Dwork & Roth 2014, Thm 3.16). A `data_norm` set
    from the bound stays in the final step's parameters; a refit compares it with the new bound.
    """

    # scikit-learn has no public hook between fitting the transformers and the final step; fit,
    # fit_transform and fit_predict each call _fit there, so the bound is handed on here rather
    # than in copies of those three methods (their routing, caching and callbacks change often).
    def _fit(self, X: Any, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        Xt = super()._fit(X, y, *args, **kwargs)
        bound = None
        for _, _, step in self._iter(with_final=False):
            bound = getattr(step, "norm_bound_", None)
        final = self._final_estimator
        if bound is not None and "data_norm" in final.get_params(deep=False):
            norm = final.get_params(deep=False)["data_norm"]
            if norm is None:
                final.set_params(data_norm=bound)
            elif norm < bound:
                warnings.warn(
                    f"rows reaching {type(final).__name__} can have L2 norm up to {bound:.4g} (the "
                    f"previous step's norm_bound_), above data_norm={norm:g}: they are clipped to "
                    f"data_norm; leave data_norm=None to use the bound",
                    ClippingWarning,
                    stacklevel=3,
                )
        return Xt

    @property
    def guarantee(self) -> Guarantee:
        """The composed guarantee of every fitted step (available after fit)."""
        parts = []
        for _, name, step in self._iter():
            g = getattr(step, "guarantee_", None)
            if g is None:
                raise InvalidParameter(
                    f"step {name!r} ({type(step).__name__}) is not a fitted bayesdp estimator: its "
                    "fit reads the rows without a privacy guarantee, so the pipeline has none"
                )
            parts.append(g)
        return sum(parts[1:], parts[0])


def make_pipeline(*steps: Any, memory: Any = None, verbose: bool = False) -> Pipeline:
    """Like `sklearn.pipeline.make_pipeline`, building a bayesdp `Pipeline`."""
    return Pipeline(sklearn.pipeline.make_pipeline(*steps).steps, memory=memory, verbose=verbose)
