"""An HTML fidelity report for a synthetic table: 1- and 2-way marginals real vs synthetic, TVD, TSTR.

The report shows statistics of the REAL data. It is for the data holder deciding whether to
release the synthetic table, not for publication: it is not differentially private.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bayesdp.synth.metrics import binned, marginal_tvd, tstr_auc
from bayesdp.synth.tabular import Synthesizer

# Plots shown: one-way marginals of the first columns, two-way heatmaps of the worst pairs.
MAX_ONE_WAY = 16
WORST_PAIRS = 3
MAX_BARS = 25


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _one_way(real: pd.Series, syn: pd.Series, labels: list[str]) -> str:
    p = real.value_counts(normalize=True).reindex(labels, fill_value=0.0)
    q = syn.value_counts(normalize=True).reindex(labels, fill_value=0.0)
    top = (p + q).sort_values(ascending=False).index[:MAX_BARS]
    keep = [lab for lab in labels if lab in set(top)]
    x = np.arange(len(keep))
    fig = Figure(figsize=(5, 2.6))
    ax = fig.subplots()
    ax.bar(x - 0.2, p[keep], width=0.4, label="real")
    ax.bar(x + 0.2, q[keep], width=0.4, label="synthetic")
    ax.set_xticks(x, [lab[:14] for lab in keep], rotation=60, ha="right", fontsize=7)
    ax.set_title(str(real.name), fontsize=9)
    ax.legend(fontsize=7)
    return _png(fig)


def _two_way(real: pd.DataFrame, syn: pd.DataFrame, a: str, b: str, tvd: float) -> str:
    rows = sorted(set(real[a]) | set(syn[a]), key=str)
    cols = sorted(set(real[b]) | set(syn[b]), key=str)
    tables = [pd.crosstab(f[a], f[b], normalize=True).reindex(index=rows, columns=cols,
                                                              fill_value=0.0).to_numpy()
              for f in (real, syn)]
    top = max(float(t.max()) for t in tables)
    fig = Figure(figsize=(9, 3.4))
    axes = fig.subplots(1, 2, gridspec_kw={"wspace": 0.5})
    for ax, t, title in zip(axes, tables, ("real", "synthetic"), strict=True):
        im = ax.imshow(t, aspect="auto", cmap="viridis", vmin=0.0, vmax=top)
        ax.set_title(f"{title}: {a} x {b}", fontsize=9)
        ax.set_xticks(range(len(cols)), [c[:10] for c in cols], rotation=60, ha="right",
                      fontsize=6)
        ax.set_yticks(range(len(rows)), [r[:14] for r in rows], fontsize=6)
        ax.set_xlabel(b, fontsize=8)
        ax.set_ylabel(a, fontsize=8)
    fig.colorbar(im, ax=list(axes))
    fig.suptitle(f"TVD {tvd:.4f}", fontsize=9)
    return _png(fig)


def synth_report(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    synthesizer: Synthesizer,
    target: str | None = None,
    progress: Callable[[str], None] = lambda stage: None,
) -> str:
    """The report as one self-contained HTML page (plots inlined); `progress` hears each stage."""
    specs = list(synthesizer.specs)
    progress(f"comparing the {len(specs) * (len(specs) - 1) // 2} two-way marginals")
    r = binned(real, specs)
    s = binned(synthetic, specs)
    tvd = marginal_tvd(r, s, 2) if len(specs) > 1 else {}
    mean_tvd = float(np.mean(list(tvd.values()))) if tvd else float("nan")
    parts = [
        "<html><head><meta charset='utf-8'><title>bayesdp synthetic data report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
        "td,th{padding:2px 8px}.warn{background:#fee;padding:8px}</style></head><body>",
        "<h1>Synthetic data report</h1>",
        "<p class='warn'><b>Not private:</b> this page shows statistics of the real data. It is "
        "for the data holder; publish the synthetic table, not this report.</p>",
        f"<p>{html.escape(synthesizer.explain())}</p>",
        "<table><tr><th>real rows</th><th>synthetic rows</th><th>columns</th>"
        "<th>mean 2-way TVD</th><th>SDNist-style 2-way score</th></tr>",
        f"<tr><td>{len(real)}</td><td>{len(synthetic)}</td><td>{len(specs)}</td>"
        f"<td>{mean_tvd:.4f}</td><td>{1000 * (1 - mean_tvd):.0f}</td></tr></table>",
    ]
    if target is not None:
        levels = sorted(real[target].astype(str).unique())
        if len(levels) == 2:
            pos = levels[1]
            progress(f"training models of {target} on the synthetic and the real rows")
            tstr = tstr_auc(synthetic, real, target, pos)
            trtr = tstr_auc(real, real, target, pos)
            parts.append(
                f"<h2>Train on synthetic, test on real</h2><p>Logistic regression predicting "
                f"{html.escape(target)} = {html.escape(pos)}: AUC {tstr:.3f} trained on the "
                f"synthetic table, {trtr:.3f} trained on the real table (in-sample), both "
                "scored on the real rows.</p>")
        else:
            parts.append(f"<p>TSTR skipped: target {html.escape(target)} has {len(levels)} "
                         "levels, the score needs two.</p>")
    progress("plotting the marginals")
    parts.append("<h2>One-way marginals</h2>")
    parts += [_one_way(r[sp.name], s[sp.name], sp.label) for sp in specs[:MAX_ONE_WAY]]
    if tvd:
        worst = sorted(tvd.items(), key=lambda kv: -kv[1])
        parts.append("<h2>Two-way marginals (worst pairs)</h2>")
        parts += [_two_way(r, s, a, b, v) for (a, b), v in worst[:WORST_PAIRS]]
        parts.append("<h2>All two-way TVDs</h2><table><tr><th>pair</th><th>TVD</th></tr>")
        parts += [f"<tr><td>{html.escape(a)} x {html.escape(b)}</td><td>{v:.4f}</td></tr>"
                  for (a, b), v in worst]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
