"""The HTML release report: table, one plot per aggregate, budget split, explanation."""

import bayesdp as bdp


def test_report_has_table_plots_plan_and_explanation(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"u": range(200), "g": ["a", "b"] * 100, "v": [float(i % 7) for i in range(200)]})
    r = bdp.table(df, "u").group_by("g", keys=["a", "b"]).agg(
        n=bdp.count(), h=bdp.histogram("v", bins=3, bounds=(0, 6))).release(
        1.0, max_groups_per_unit=1, rng=bdp.rng_for_tests(0))
    path = r.report(tmp_path / "r.html", n=200)
    text = path.read_text()
    assert text.count("<img") == 2 and "Budget split" in text
    assert "h[0, 2)" in text and "per u (add/remove" in text and "What the guarantee means" in text
