"""`bayesdp audit MODULE:CALLABLE ...`: verdict, witness, exit codes and user errors."""

import textwrap

import pytest

from bayesdp.cli import main


@pytest.fixture
def mechanisms(tmp_path, monkeypatch):
    (tmp_path / "audit_cli_mechs.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            import bayesdp

            laplace = bayesdp.Laplace(1.0)

            def coin(x, size, rng):  # reveals x with probability 0.9: ε = ln 9
                return np.where(rng.random(size) < 0.9, x, 1 - x)
            """
        )
    )
    monkeypatch.chdir(tmp_path)


def test_passing_audit_exits_0(mechanisms, capsys):
    code = main(["audit", "audit_cli_mechs:laplace", "--d0", "0", "--d1", "1",
                 "--epsilon", "1", "--samples", "20000", "--seed", "1", "--alpha", "1e-6"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0 and out.startswith("PASSED")  # false failure <= α = 1e-6
    assert "Witness: the event" in out
    assert "seeded run: NOT private" in " ".join(captured.err.split())


def test_refuted_claim_exits_1_and_names_the_witness(mechanisms, capsys):
    code = main(["audit", "audit_cli_mechs:coin", "--d0", "0", "--d1", "1", "--epsilon", "1",
                 "--samples", "20000", "--seed", "2", "--alpha", "1e-6"])
    out = capsys.readouterr().out
    # P(output = x) = 0.9 vs 0.1: at 20,000 runs ε_LB ≈ 2.1 against the claim 1.
    assert code == 1 and out.startswith("FAILED")
    assert "output" in out and "20,000 runs on 0" in out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("audit_cli_mechs", "MODULE:CALLABLE"),
        ("no_such_module_xyz:f", "cannot import module"),
        ("audit_cli_mechs:missing", "has no attribute 'missing'"),
        ("bayesdp:Laplace", "not a class"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(mechanisms, capsys, target, message):
    code = main(["audit", target, "--d0", "0", "--d1", "1", "--epsilon", "1"])
    err = capsys.readouterr().err
    assert code == 2 and message in err.replace("\n", " ") and "Traceback" not in err


def test_bad_json_is_an_argument_error(mechanisms, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "audit_cli_mechs:coin", "--d0", "[0", "--d1", "1", "--epsilon", "1"])
    assert exit_info.value.code == 2 and "not valid JSON" in capsys.readouterr().err
