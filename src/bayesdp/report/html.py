"""A self-contained HTML report of a table release (plots embedded as PNG)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bayesdp.errors import check_writable

if TYPE_CHECKING:
    from bayesdp.tables.release import Release

_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;
text-align:right}th{background:#f3f3f3}pre{white-space:pre-wrap;background:#f8f8f8;padding:1em}
.note{color:#555;font-size:13px}.warn{background:#fdecea;border:2px solid #c62828;padding:.6em}"""


# Columns of one aggregate (a histogram's bins) drawn in colours of their own, up to this many.
MAX_COLOURED = 20


def _plot(release: Release, name: str) -> str:
    """One aggregate across groups with its intervals as error bars, as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    est = release.estimates[name]
    value, low, high = (np.atleast_2d(a.T).T if a.ndim == 1 else a for a in (est.value, est.low, est.high))
    labels = _labels(release)
    fig, ax = plt.subplots(figsize=(7, 0.35 * max(len(labels), 4) + 1.2))
    y = np.arange(len(labels))
    k = value.shape[1]
    # Each column (a histogram's bin) beside the others in its group's row; bars are never
    # negative, whatever the estimate (matplotlib refuses negative xerr).
    ys = y[:, None] + (np.arange(k) - (k - 1) / 2) * 0.8 / k
    below = np.nan_to_num(np.maximum(value - low, 0.0))
    above = np.nan_to_num(np.maximum(high - value, 0.0))
    # A colour per column when they are few; one call for many (a call per bin: 48 s for 10,000).
    for j in [slice(j, j + 1) for j in range(k)] if k <= MAX_COLOURED else [slice(None)]:
        ax.errorbar(value[:, j].ravel(), ys[:, j].ravel(), xerr=[below[:, j].ravel(), above[:, j].ravel()],
                    fmt="o", ms=3, capsize=2)
    ax.set_yticks(y, labels)
    ax.set_ylabel(", ".join(map(str, release.keys.columns)))
    ax.set_title(f"{name} = {release.describe(name)} (bars: {release.coverage(name):.0%} intervals)",
                 fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _labels(release: Release) -> list[str]:
    keys = release.keys
    if keys.shape[1] == 0:
        return ["all"] if len(keys) == 1 else [str(i + 1) for i in range(len(keys))]
    return [", ".join(str(v) for v in row) for row in keys.itertuples(index=False)]


def _heading(release: Release, title: str | None) -> tuple[str, str]:
    """The page title (given, else the release's label) and a line naming the dataset and time."""
    name = title or release.label or "Private release"
    source = f"Dataset: {release.dataset}. " if release.dataset else ""
    return name, f"{source}Released {release.created:%Y-%m-%d %H:%M} UTC."


def write_release_report(release: Release, path: str | Path, *, title: str | None = None,
                         n: int | None = None, curator: str | Path | None = None) -> Path:
    """Write the publishable report (released table, one plot per aggregate, budget split,
    explanation: differentially private values and public parameters only) and, when `curator`
    is given, the curator-only page of exact diagnostics. Paths are checked first."""
    out = check_writable("path", path)
    if curator is not None:
        check_writable("curator", curator)
    name, when = _heading(release, title)
    df = release.to_pandas()
    plan_rows = release.plan.table()
    plan_html = "<table><tr>" + "".join(f"<th>{html.escape(k)}</th>" for k in plan_rows[0]) + "</tr>"
    for r in plan_rows:
        plan_html += "<tr>" + "".join(
            f"<td>{html.escape(f'{v:.6g}' if isinstance(v, float) else str(v if v is not None else ''))}</td>"
            for v in r.values()) + "</tr>"
    plan_html += "</table>"
    plots = "".join(f'<img alt="{html.escape(k)}" src="data:image/png;base64,{_plot(release, k)}">'
                    for k in release.estimates)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in release.caveats())
    body = f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(name)}</title>
<style>{_STYLE}</style></head><body><h1>{html.escape(name)}</h1>
<p class="note">{html.escape(when)}</p>
<p><b>Guarantee:</b> {html.escape(str(release.guarantee))}. {len(df)} group(s) released.</p>
<h2>Released values</h2>{df.to_html(index=False, float_format=lambda v: f"{v:.6g}")}
<ul class="note">{caveats}</ul>
<h2>Plots</h2>{plots}
<h2>Budget split</h2><pre>{html.escape(release.plan.describe())}</pre>{plan_html}
<h2>What the guarantee means</h2><p>{html.escape(release.guarantee.explain(n))}</p>
</body></html>"""
    out.write_text(body, encoding="utf-8")
    if curator is not None:
        write_curator_report(release, curator, title=title)
    return out


def write_curator_report(release: Release, path: str | Path, *, title: str | None = None) -> Path:
    """Write the curator-only page: the exact, data-dependent diagnostics of a release, marked
    as not differentially private (never to be published)."""
    out = check_writable("curator", path)
    name, when = _heading(release, title)
    notes = "".join(f"<li>{html.escape(c)}</li>" for c in release.curator_notes())
    body = f"""<!doctype html><html><head><meta charset="utf-8">
<title>CURATOR ONLY: {html.escape(name)}</title><style>{_STYLE}</style></head><body>
<h1>CURATOR ONLY, do not publish: {html.escape(name)}</h1>
<p class="warn">These counts are exact and data-dependent: they are not differentially private
and are for the data holder only. The publishable report leaves them out.</p>
<p class="note">{html.escape(when)}</p><ul>{notes}</ul>
</body></html>"""
    out.write_text(body, encoding="utf-8")
    return out
