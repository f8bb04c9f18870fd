"""The error family: a public message for analysts, a private detail for the data holder."""

import pickle

import pytest

from bayesdp.errors import (
    BayesdpError,
    DataError,
    InvalidParameter,
    LedgerError,
    ResourceError,
    check_delta,
    check_finite,
    check_positive,
    invalid,
)


def test_existing_constructors_keep_working():
    exc = InvalidParameter("epsilon must be positive")
    assert str(exc) == exc.public_message == "epsilon must be positive"
    assert exc.private_detail is None
    built = invalid("epsilon", -1, "a finite number > 0")
    assert built.public_message == str(built)
    assert "epsilon=-1" in str(built)
    assert isinstance(built, ValueError)


def test_private_detail_is_kept_apart_from_the_public_message():
    exc = DataError("privacy_unit 'user' has null values", private_detail="null in 3 rows")
    assert exc.public_message == "privacy_unit 'user' has null values"
    assert "3" not in exc.public_message
    assert exc.private_detail == "null in 3 rows"
    # The data holder, in their own process, sees both.
    assert "privacy_unit 'user' has null values" in str(exc)
    assert "null in 3 rows" in str(exc)


@pytest.mark.parametrize("cls", [BayesdpError, DataError, InvalidParameter, LedgerError, ResourceError])
def test_errors_survive_pickling_with_their_detail(cls):
    exc = cls("public part", private_detail="secret part")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert back.public_message == "public part"
    assert back.private_detail == "secret part"


def test_resource_error_is_a_memory_error_and_a_bayesdp_error():
    exc = ResourceError("the engine ran out of memory", private_detail="Out of Memory Error: 1 GiB")
    assert isinstance(exc, MemoryError)
    assert isinstance(exc, BayesdpError)


@pytest.mark.parametrize("check", [check_finite, check_positive, check_delta])
def test_an_integer_beyond_a_float_is_refused_by_name(check):
    with pytest.raises(InvalidParameter, match="epsilon="):
        check("epsilon", 10**400)
