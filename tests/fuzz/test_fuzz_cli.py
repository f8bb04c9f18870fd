"""Fuzz: the command line through `bayesdp.cli.main`: exit 0 or 2, never a traceback."""

import pandas as pd
import pytest
from fuzzing import CLI_FUZZ
from hypothesis import given
from hypothesis import strategies as st

from bayesdp.cli import main

numbers = st.sampled_from(["0", "-1", "1e-300", "5e-324", "1e-12", "0.5", "1", "700", "800",
                           "1e300", "inf", "nan", "abc", ""])


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusing an option's type exits 2
        code = exc.code
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)


@CLI_FUZZ
@given(epsilon=numbers, delta=numbers, n=st.sampled_from(["1", "100", "0", "-3"]),
       as_json=st.booleans())
def test_explain(capsys, epsilon, delta, n, as_json):
    run_cli(["explain", "--epsilon", epsilon, "--delta", delta, "--n", n] +
            (["--json"] if as_json else []), capsys)


@CLI_FUZZ
@given(epsilon=numbers, length=st.sampled_from(["1", "10", "0", "1000000000000"]),
       transition=st.sampled_from(["0.9,0.1;0.2,0.8", "0.5,0.5;0.5,0.5", "1,0;0,1", "a"]))
def test_correlated(capsys, epsilon, length, transition):
    run_cli(["correlated", "--transition", transition, "--length", length, "--epsilon", epsilon,
             "--json"], capsys)


@CLI_FUZZ
@given(epsilon=numbers, delta=numbers, bounds=st.sampled_from(["[0, 5]", "[-1e300, 1e300]",
                                                                "[5, 0]", "[0, 0]"]),
       kind=st.sampled_from(["count", "sum", "mean", "std", "quantile", "histogram", "nope"]),
       out=st.sampled_from([None, "out.csv", "out.xlsx", "out.parquet"]),
       where=st.sampled_from([None, "v > 100", "(SELECT 1) > 0"]))
def test_release(tmp_path_factory, capsys, epsilon, delta, bounds, kind, out, where):
    folder = tmp_path_factory.mktemp("release")
    data, spec = folder / "d.csv", folder / "s.toml"
    pd.DataFrame({"u": [1, 2, 3, 4], "g": ["a", "b", "a", "b"],
                  "v": [1.0, 2.0, 3.0, 4.0]}).to_csv(data, index=False)
    column = "" if kind == "count" else f', column = "v", bounds = {bounds}'
    spec.write_text('privacy_unit = "u"\ngroup_by = ["g"]\nkeys = ["a", "b"]\n'
                    + (f'where = "{where}"\n' if where else "")
                    + f'[aggregates]\nx = {{ kind = "{kind}"{column} }}\n')
    argv = ["release", str(data), "--spec", str(spec), "--epsilon", epsilon, "--delta", delta]
    run_cli(argv + (["--out", str(folder / out)] if out else []), capsys)
