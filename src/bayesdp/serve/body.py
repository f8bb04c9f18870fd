"""A request's JSON body, read strictly before anything else looks at it.

Python's parser accepts NaN and Infinity, nests as deep as its stack allows and keeps a lone
surrogate escape (\\ud800) as text no encoder can write: each would fail later, after the
spend or while storing the answer. Here they are refused at once, with the value's path.
"""

from __future__ import annotations

import json
from typing import Any

from bayesdp.errors import InvalidParameter
from bayesdp.tables.spec import MAX_DEPTH, check_values


def _no_constant(name: str) -> Any:
    raise InvalidParameter(f"{name} is not allowed in the body: every number must be finite")


def parse_body(raw: bytes) -> Any:
    """The JSON value of a request body (null when empty), checked by `check_values`."""
    try:
        doc = json.loads(raw or b"null", parse_constant=_no_constant)
    except RecursionError:
        raise InvalidParameter(f"the body is nested too deeply: at most {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, InvalidParameter):
            raise
        raise InvalidParameter(f"the body is not valid JSON: {exc}") from None
    check_values(doc)
    return doc


def read_stored(text: str) -> Any:
    """A response stored by an earlier version, which could hold NaN: read as null, so that
    one bad row cannot make an analyst's listing fail for ever."""
    return json.loads(text, parse_constant=lambda _: None)
