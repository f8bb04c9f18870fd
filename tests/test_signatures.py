"""Calling conventions of the public API (DESIGN, Conventions): public constructors are keyword-only
after their first argument, and `rng=` is keyword-only wherever a public function or method
takes it (tables/ and sql/ have their own test; noise/ samplers take a generator as operand)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import pytest

PACKAGES = ["bayesdp.correlated", "bayesdp.holdout", "bayesdp.mechanisms", "bayesdp.privacy",
            "bayesdp.synth", "bayesdp.audit", "bayesdp.report"]
if importlib.util.find_spec("sklearn") is not None:  # bayesdp.models needs the `models` extra
    PACKAGES.append("bayesdp.models")
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _public() -> list[tuple[str, object]]:
    out = []
    for name in PACKAGES:
        module = importlib.import_module(name)
        out.extend((f"{name}.{attr}", getattr(module, attr)) for attr in module.__all__)
    return out


def _positional(fn: object) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind in POSITIONAL and p.name not in ("self", "cls")]


def _callables(obj: object) -> list[tuple[str, object]]:
    if not inspect.isclass(obj):
        return [("", obj)] if callable(obj) else []
    methods = [(f".{n}", m) for n, m in vars(obj).items()
               if not n.startswith("_") and inspect.isfunction(m)]
    return [(".__init__", obj), *methods]


@pytest.mark.parametrize(("name", "cls"), [(n, o) for n, o in _public() if inspect.isclass(o)
                                           and not issubclass(o, BaseException)])
def test_public_constructors_are_keyword_only_after_the_first_argument(name, cls):
    assert len(_positional(cls)) <= 1, f"{name}{inspect.signature(cls)}"


def test_rng_is_keyword_only_everywhere():
    offenders = []
    for name, obj in _public():
        for suffix, fn in _callables(obj):
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if "rng" in params and params["rng"].kind in POSITIONAL:
                offenders.append(f"{name}{suffix}")
    assert offenders == []
