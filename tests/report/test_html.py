"""The HTML release report: publishable (DP values only), with a separate curator-only page."""

import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.cli import main
from bayesdp.errors import InvalidParameter
from bayesdp.report import write_release_report


@pytest.fixture
def release():
    df = pd.DataFrame({"u": range(200), "g": ["a", "b"] * 100, "v": [float(i % 9) for i in range(200)]})
    return bdp.table(df, "u", name="survey 2024").group_by("g", keys=["a", "b"]).agg(
        n=bdp.count(), h=bdp.histogram("v", bins=3, bounds=(0, 6))).release(
        1.0, max_groups_per_unit=1, label="Visits by group", rng=bdp.rng_for_tests(0))


def test_report_has_table_plots_plan_and_explanation(release, tmp_path):
    path = write_release_report(release, tmp_path / "r.html", n=200)
    text = path.read_text()
    assert text.count("<img") == 2 and "Budget split" in text
    assert "h[0, 2)" in text and "per u (add/remove" in text and "What the guarantee means" in text


def test_the_publishable_report_holds_no_exact_counts(release, tmp_path):
    """44 of the 200 values (6, 7, 8) lie above the bounds: only the curator page says so."""
    text = write_release_report(release, tmp_path / "r.html").read_text()
    assert "<title>Visits by group</title>" in text and "Dataset: survey 2024" in text
    assert f"{release.created:%Y-%m-%d %H:%M} UTC" in text
    for exact in ("Bounding kept", "kept values", "200 rows"):
        assert exact not in text, exact
    assert not (tmp_path / "r.curator.html").exists()
    write_release_report(release, tmp_path / "p.html", title="Public title", curator=tmp_path / "c.html")
    assert "<title>Public title</title>" in (tmp_path / "p.html").read_text()
    private = (tmp_path / "c.html").read_text()
    assert "CURATOR ONLY" in private and "not differentially private" in private
    assert "44 kept values of &#x27;v&#x27; were clipped to [0, 6]" in private
    assert "Bounding kept 200 of 200 rows" in private


def test_a_report_into_a_missing_directory_fails_before_writing(release, tmp_path):
    with pytest.raises(InvalidParameter, match=r"path=.* existing directory"):
        write_release_report(release, tmp_path / "missing" / "r.html")
    with pytest.raises(InvalidParameter, match=r"curator=.* existing directory"):
        write_release_report(release, tmp_path / "r.html", curator=tmp_path / "missing" / "c.html")
    assert not (tmp_path / "r.html").exists()


def test_cli_reports_are_split_and_titled(tmp_path, capsys):
    df = pd.DataFrame({"u": range(50), "v": [float(i) for i in range(50)]})
    data, spec = tmp_path / "people.csv", tmp_path / "spec.toml"
    df.to_csv(data, index=False)
    spec.write_text('privacy_unit = "u"\nlabel = "Mean v"\nepsilon = 1.0\n'
                    '[aggregates]\nm = { kind = "mean", column = "v", bounds = [0, 10] }\n')
    report, curator = tmp_path / "r.html", tmp_path / "c.html"
    assert main(["release", str(data), "--spec", str(spec), "--report", str(report),
                 "--curator-report", str(curator)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "kept values" not in out and "curator only" in out
    text = report.read_text()
    assert "<title>Mean v</title>" in text and "Dataset: people.csv" in text and "kept values" not in text
    assert "39 kept values of &#x27;v&#x27; were clipped to [0, 10]" in curator.read_text()
    missing = tmp_path / "missing" / "c.html"
    assert main(["release", str(data), "--spec", str(spec), "--curator-report", str(missing)]) == 2
    assert "--curator-report" in capsys.readouterr().err


def test_a_derived_value_states_its_own_coverage(tmp_path):
    # SUM(v) / COUNT(*) combines two 95% intervals: it covers with probability >= 90%, and the
    # report, the caveats and the command line's table say so for that column.
    from bayesdp.commands.release import render

    df = pd.DataFrame({"u": range(200), "g": ["a", "b"] * 100, "v": [float(i % 9) for i in range(200)]})
    out = bdp.sql("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
                  "privacy_unit_column = u) g, SUM(v, contribution_bounds_per_group => (0, 8)) / COUNT(*) "
                  "AS per_row, COUNT(*) AS n "
                  "FROM t GROUP BY g", {"t": df}, rng=bdp.rng_for_tests(1))
    assert out.coverage("per_row") == pytest.approx(0.9) and out.coverage("n") == pytest.approx(0.95)
    assert "per_row's at least 90%" in out.caveats()[0]
    assert "per_row ≥ 90%" in str(render(out).title)
    assert "per_row&#x27;s at least 90%" in write_release_report(out, tmp_path / "r.html").read_text()
