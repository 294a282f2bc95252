"""Figures of one study from the frames of foxwb.workbench.analysis.runs: the ablation table (HTML, Table 3
layout), per-position loss L(i) and P(l), training curves, hyperparameter sensitivity, which
heads forget, and parameter counts with throughput. Every string from the store is escaped: names are data."""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from foxwb.workbench.analysis import table
from foxwb.workbench.analysis.report import SPIKES, chosen_note
from foxwb.workbench.analysis.scaling.laws import LOSS as LADDER_LOSS
from foxwb.workbench.analysis.scaling.solve import law

# Table 3's column order, with the paper's names.
SLOT_NAMES = {"rope": "RoPE", "forget_gate": "Forget gate", "qk_norm": "QK-norm", "output_gate": "Output gate",
              "output_norm": "Output norm", "kv_shift": "KV-shift"}
SIGNIFICANCE = "the paired two-sided t-test against the base gives p < {alpha:g}{holm}"
BAND = "band: min to max over seeds"


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def _slot_cell(slot: str, kind) -> str:
    """A check for the kind the paper's presets use, the kind's name for any other, blank for none."""
    if kind in (None, "none"):
        return '<td class="mark"></td>'
    text = "&#10003;" if kind == table.STANDARD_KINDS[slot] else f'<span class="kind">{esc(kind)}</span>'
    return f'<td class="mark" title="{esc(kind)}">{text}</td>'


def _runs_cell(r: dict) -> str:
    parts = [f"{r[k]} {k}" for k in ("finished", "failed", "killed", "running", "stopped", "to_run") if r.get(k)]
    text = esc(", ".join(parts).replace("to_run", "to run"))
    if r["reasons"]:
        return f'<td class="runs failed" title="{esc(chr(10).join(r["reasons"]))}">{text}</td>'
    return f'<td class="runs">{text}</td>'


def _spikes_cell(r: dict) -> str:
    if r.get("runs_spiked") is None:
        return '<td class="num"></td>'
    title = (f'{r["grad_spikes"]} gradient-norm and {r["loss_spikes"]} loss spikes; largest gradient norm after '
             f'warmup {r["grad_norm_max"]:#.3g}')
    mark = '<span class="spike">&#9889;</span> ' if r["runs_spiked"] else ""
    return f'<td class="num spikes" title="{esc(title)}">{mark}{r["runs_spiked"]}/{r["finished"]}</td>'


def _delta_cell(r: dict, alpha: float, holm: bool) -> str:
    if r["comparison"] == "base":
        return '<td class="num">base</td>'
    if r["delta"] is None:
        why = "no base row at these searched values" if r["search_point"] else "no finished seeds to compare"
        return f'<td class="num" title="{esc(why)}">&mdash;</td>'
    p = r["p_holm"] if holm else r["p_value"]
    star = f' <span class="sig" title="p = {p:.3g}">&#9733;</span>' if p is not None and p < alpha else ""
    vs = f'<br><span class="vs">vs {esc(r["base_row"])} ({esc(r["comparison"])})</span>' if r["search_point"] else ""
    paired = ""
    if r["paired_n"] and r["paired_ci95"] is not None:
        paired = (f'<br><span class="paired" title="mean of the per-seed differences from {esc(r["base_row"])}, '
                  f'{r["paired_n"]} seeds">paired {r["paired_delta"]:+.3f} &plusmn; {r["paired_ci95"]:.3f}</span>')
    elif r.get("test") == "welch" and r.get("welch_ci95") is not None:
        paired = (f'<br><span class="paired" title="Welch, unpaired: the difference of the means over '
                  f'{r["n_seeds"]} and {r["base_n_seeds"]} seeds of {esc(r["base_row"])}">Welch '
                  f'{r["delta"]:+.3f} &plusmn; {r["welch_ci95"]:.3f}</span>')
    return f'<td class="num">{r["delta"]:+.3f}{star}{paired}{vs}</td>'


def ablation_table(rows: pl.DataFrame, info: table.StudyInfo, metric: str = "val_ppl", holm: bool = True) -> str:
    """One row per table row (foxwb.workbench.analysis.table): the kind per slot, parameters, seeds (marked when
    fewer than the study asks for), mean with 95% CI, delta vs the base with the paired comparison,
    its p and MDE, the runs by state (failures' reasons on hover), spikes and the workers per trial."""
    head = "".join(f"<th>{n}</th>" for n in SLOT_NAMES.values())
    body = []
    for r in rows.iter_rows(named=True):
        marks = "".join(_slot_cell(s, r[f"slot.{s}"]) for s in SLOT_NAMES)
        ci = f" &plusmn; {r['ci95']:.3f}" if r["ci95"] is not None else ""
        value = f"{r['mean']:.3f}{ci}" if r["mean"] is not None else ""
        seeds = (f'<span class="fewer" title="the study asks for {r["seeds_expected"]} seeds">{r["n_seeds"]}/'
                 f'{r["seeds_expected"]}</span>' if r["fewer_seeds"] else str(r["n_seeds"]))
        params = f"{r['n_params']:,}" if r["n_params"] is not None else ""
        p = r["p_holm"] if holm else r["p_value"]
        p_text = "" if p is None else f"{p:.3g}"
        mde = "" if r["mde"] is None else f"{r['mde']:.3f}"
        chosen = (f'<br><span class="chosen" title="the searched values the confirmation runs at">chosen: '
                  f'{esc(r["chosen"])}</span>' if r.get("chosen") else "")
        body.append(f'<tr><td class="variant">{esc(r["row"])}{chosen}</td>{marks}<td class="num">{params}</td>'
                    f'<td class="num">{seeds}</td><td class="num value">{value}</td>{_delta_cell(r, info.alpha, holm)}'
                    f'<td class="num">{p_text}</td><td class="num mde">{mde}</td>{_runs_cell(r)}{_spikes_cell(r)}'
                    f'<td class="num workers">{esc(r.get("workers") or "")}</td></tr>')
    test = "paired or Welch" if "welch" in rows["test"].to_list() else "paired"
    p_head = f"p ({test}, Holm)" if holm else f"p ({test})"
    return (f'<table class="ablation"><thead><tr><th>Variant</th>{head}<th>Params</th><th>Seeds</th>'
            f"<th>{esc(metric)} (mean &plusmn; 95% CI)</th><th>&Delta; vs {esc(info.base)}</th><th>{p_head}</th>"
            f'<th>MDE</th><th>Runs</th><th>Spikes</th><th title="processes per trial (Ray Train)">Workers</th></tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><p class="note">{table_note(info, holm)}</p>')


def table_note(info: table.StudyInfo, holm: bool) -> str:
    kinds = ", ".join(f"{s} {k}" for s, k in table.STANDARD_KINDS.items())
    chosen = chosen_note(info) if info.choice else ""
    return (f"Base: {esc(info.base)} ({esc(info.base_from)}). &#10003;: the kind the paper's presets use ({esc(kinds)}); "
            "another kind is named. CI: Student t over seeds; a seed count k/n: k finished where the study asks for "
            f"n. &#9733;: {SIGNIFICANCE.format(alpha=info.alpha, holm=', Holm-adjusted over the distinct comparisons' if holm else '')}. "
            "Paired: the mean and 95% CI of the per-seed differences from the base (a seed fixes the data order of "
            "every variant), over the seeds both have. MDE: the smallest true difference the paired test detects "
            f"with 80% power at alpha {info.alpha:g}, given that spread and n (docs/statistics.md). With a search, "
            "a row is compared with the base at the same searched values, else a variant's best row (lowest mean "
            "val_loss) with the base's best, chosen on these runs. Runs: by state; hover a failure for its reason."
            + (f" {esc(chosen[0].upper() + chosen[1:])}." if chosen else "")
            + f" &#9889; Spikes{esc(SPIKES[len('spikes'):])}.")


def _band(fig, x, ys: np.ndarray, name: str, color: str, row=None, col=None) -> None:
    """Mean line with a min-max band over seeds (ys: [seeds, points])."""
    where = {"row": row, "col": col} if row else {}
    lo, hi, mean = ys.min(0), ys.max(0), ys.mean(0)
    fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]), y=np.concatenate([hi, lo[::-1]]), fill="toself",
                             fillcolor=color, opacity=0.2, line={"width": 0}, hoverinfo="skip", showlegend=False,
                             legendgroup=name), **where)
    fig.add_trace(go.Scatter(x=x, y=mean, name=esc(name), line={"color": color}, legendgroup=name,
                             showlegend=row in (None, 1) and col in (None, 1)), **where)


def _colors(names) -> dict[str, str]:
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return {n: palette[i % len(palette)] for i, n in enumerate(names)}


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average; the ends average over what exists."""
    kernel = np.ones(window)
    return np.convolve(y, kernel, "same") / np.convolve(np.ones_like(y), kernel, "same")


def per_position_figure(curves: dict[str, np.ndarray], context: int) -> go.Figure:
    """curves: variant -> [seeds, positions] of L(i). Left L(i) smoothed, right P(l) on log x."""
    length = max(ys.shape[1] for ys in curves.values())  # rows may differ in context (a grid over it)
    window = max(1, (length // 64) | 1)
    fig = make_subplots(1, 2, subplot_titles=(f"L(i), centred moving average of {window} tokens; {BAND}",
                                              "P(l) = exp(mean of L(1..l))"))
    colors = _colors(curves)
    for name, ys in curves.items():
        x = np.arange(1, ys.shape[1] + 1)
        _band(fig, x, np.stack([smooth(y, window) for y in ys]), name, colors[name], 1, 1)
        _band(fig, x, np.exp(np.cumsum(ys, 1) / x), name, colors[name], 1, 2)
    for col in (1, 2):
        fig.add_vline(x=context, line_dash="dash", line_color="gray", row=1, col=col)
    fig.add_annotation(x=context, y=1, yref="paper", text="training length", showarrow=False, xanchor="left")
    fig.update_xaxes(title_text="position i (tokens)", row=1, col=1)
    fig.update_xaxes(title_text="context length l (tokens)", type="log", row=1, col=2)
    fig.update_yaxes(title_text="loss (nats/token)", row=1, col=1)
    fig.update_yaxes(title_text="perplexity", row=1, col=2)
    return fig.update_layout(height=420, margin={"t": 60})


KEPT_HISTORY_TITLE = "Share of causal pairs pruning keeps, during training"
KEPT_HISTORY_NOTE = ("acp_kept_fraction, logged at every validation by each model with forget gates: the share of causal "
             "pairs adaptive computation pruning keeps on the first held-out sequence, at the model's ln eps or, "
             "where pruning is off, at -10 (what it would keep). It rises as the gates learn to forget.")
_CURVE_LABELS = {"val_loss": ("Validation loss during training", "validation loss (nats/token)"),
                 "acp_kept_fraction": (KEPT_HISTORY_TITLE, "share of causal pairs kept")}


def training_curves_figure(curves: dict[str, tuple[np.ndarray, np.ndarray]], metric: str = "val_loss") -> go.Figure:
    """curves: row -> (tokens, [seeds, points] of ``metric``'s history)."""
    fig = go.Figure()
    colors = _colors(curves)
    for name, (tokens, ys) in curves.items():
        _band(fig, tokens, ys, name, colors[name])
    title, axis = _CURVE_LABELS.get(metric, (f"{metric} during training", metric))
    return fig.update_layout(title=f"{title}; {BAND}", xaxis_title="training tokens", yaxis_title=axis, height=400)


def sensitivity_figure(points: pl.DataFrame, metric: str = "val_loss") -> go.Figure:
    """points: variant, param, value, metric: one marker per trial, a line per variant."""
    fig = go.Figure()
    colors = _colors(points["variant"].unique(maintain_order=True).to_list())
    for (variant, param), group in points.sort("value").group_by(["variant", "param"], maintain_order=True):
        fig.add_trace(go.Scatter(x=group["value"].to_list(), y=group[metric].to_list(), mode="lines+markers",
                                 name=esc(f"{variant} ({param})"), line={"color": colors[variant]}))
    log = points.height > 0 and points["value"].min() > 0 and points["value"].max() / points["value"].min() > 10
    return fig.update_layout(title="Hyperparameter sensitivity: final validation loss per searched value",
                             xaxis_title="searched value", xaxis_type="log" if log else "linear",
                             yaxis_title=f"{metric} (nats/token)", height=400)


SEEDS_TITLE = "Seed spread: each seed's {metric} against its row's mean"


def seeds_figure(values: dict[str, dict[int, float]], order: list[str], metric: str = "val_ppl") -> go.Figure:
    """values: row -> {seed: metric} (foxwb.workbench.analysis.table.row_seed_values). A box per row in ``order``
    with every seed a dot, at its difference from the row's mean in % of that mean, so that rows of
    very different levels share one axis; the row's label carries n and the sd in %. The spread
    the power analysis reads is that of paired differences, which a seed effect shared by the rows
    makes smaller than these."""
    fig = go.Figure()
    colors = _colors(order)
    for row in order:
        seeds = values.get(row) or {}
        if not seeds:
            continue
        xs = np.array(list(seeds.values()), dtype=float)
        mean = xs.mean()
        rel = 100 * (xs / mean - 1) if mean else np.zeros_like(xs)
        sd = f", sd {100 * xs.std(ddof=1) / abs(mean):.1f}%" if len(xs) > 1 and mean else ""
        label = f"{esc(row)}<br>n={len(xs)}{sd}"
        fig.add_trace(go.Box(y=rel.tolist(), x=[label] * len(xs), name=esc(row), boxpoints="all", jitter=0.4, pointpos=0,
                             marker={"color": colors[row], "size": 6}, line={"color": colors[row]}, showlegend=False,
                             customdata=[[seed, value] for seed, value in seeds.items()],
                             hovertemplate="seed %{customdata[0]}: %{customdata[1]:.4g} (%{y:+.2f}%)<extra></extra>"))
    return fig.update_layout(title=SEEDS_TITLE.format(metric=metric), yaxis_title=f"{metric}, % from the row's mean",
                             yaxis_zeroline=True, height=420)


KEPT_TITLE = "attention kept (pruning threshold)"
HEADS_TITLE = "Which heads forget"


def forgetting_heads_figure(maps: dict[str, np.ndarray], log_eps: float) -> go.Figure:
    """maps: variant -> (layers, heads) share of causal pairs above pruning's threshold (mean over
    seeds). Dark: the head forgets within a few tokens; light: it keeps most of the sequence."""
    names = list(maps)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig = make_subplots(rows, cols, subplot_titles=[esc(n) for n in names], horizontal_spacing=0.06,
                        vertical_spacing=0.12)
    for i, name in enumerate(names):
        z = maps[name]
        fig.add_trace(go.Heatmap(z=z.tolist(), x=list(range(z.shape[1])), y=list(range(z.shape[0])), zmin=0, zmax=1,
                                 colorscale="Viridis", showscale=i == 0, colorbar={"title": "share kept"},
                                 hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
        fig.update_xaxes(title_text="head", dtick=1, row=i // cols + 1, col=i % cols + 1)
        fig.update_yaxes(title_text="layer", dtick=1, autorange="reversed", row=i // cols + 1, col=i % cols + 1)
    return fig.update_layout(title=f"Share of causal pairs above pruning's threshold (ln eps = {log_eps:g}), "
                                   "per layer and head, mean over seeds",
                             height=320 * rows + 80, margin={"t": 90})


MEMORY_KEYS = ("peak_memory_train_mb", "peak_memory_eval_mb", "peak_rss_mb")
MEMORY_NAMES = {"peak_memory_train_mb": "GPU, training", "peak_memory_eval_mb": "GPU, evaluation",
                "peak_rss_mb": "host (peak RSS)"}


def _has(frame: pl.DataFrame, key: str) -> bool:
    return key in frame.columns and frame[key].drop_nulls().len() > 0


def cost_figure(per_variant: pl.DataFrame) -> go.Figure:
    """per_variant: variant, n_params, tokens_per_s, mfu and, where recorded (means over seeds):
    acp_kept_fraction (the share of causal pairs above adaptive computation pruning's threshold,
    what pruning would compute; small: fast-forgetting heads), peak memory in MB (the GPU
    allocator's peak in training and in evaluation; without a GPU the process's peak resident
    set) and gpu_utilization_mean (%, NVML's utilisation sampled during the trial)."""
    names = [esc(v) for v in per_variant["variant"].to_list()]
    panels = [(["n_params"], "parameters"), (["tokens_per_s"], "throughput (tokens/s)"),
              (["mfu"], "MFU" if _has(per_variant, "mfu") else "MFU (n/a: no GPU peak)")]
    if _has(per_variant, "acp_kept_fraction"):
        panels.append((["acp_kept_fraction"], KEPT_TITLE))
    gpu_memory = [k for k in MEMORY_KEYS[:2] if _has(per_variant, k)]
    if gpu_memory or _has(per_variant, "peak_rss_mb"):
        panels.append((gpu_memory or ["peak_rss_mb"], "peak memory (MB)" if gpu_memory else "peak memory (MB, host: no GPU)"))
    if _has(per_variant, "gpu_utilization_mean"):
        panels.append((["gpu_utilization_mean"], "GPU utilisation (%, mean)"))
    fig = make_subplots(1, len(panels), subplot_titles=[title for _, title in panels])
    for col, (keys, _) in enumerate(panels, start=1):
        for key in keys:
            values = per_variant[key].to_list() if key in per_variant.columns else [None] * len(names)
            fig.add_trace(go.Bar(x=names, y=values, name=MEMORY_NAMES.get(key, key), showlegend=len(keys) > 1),
                          row=1, col=col)
    return fig.update_layout(height=380, margin={"t": 60}, barmode="group")


def scaling_figure(ladder: pl.DataFrame, fits: list, order: list[str]) -> go.Figure:
    """Loss against non-embedding parameters (log-log): every run as a marker, each variant's fitted
    law over its ladder and on to its extrapolation with the 95% band of the bootstrap refits, the
    prediction marked with its interval."""
    fig = go.Figure()
    colors = _colors(order)
    by_variant = {f.variant: f for f in fits}
    for variant in order:
        mine = ladder.filter(pl.col("variant") == variant)
        if mine.is_empty():
            continue
        fig.add_trace(go.Scatter(x=mine["n_params_non_embedding"].to_list(), y=mine[LADDER_LOSS].to_list(), mode="markers",
                                 name=esc(f"{variant} (runs)"), marker={"color": colors[variant]}, legendgroup=variant))
        f = by_variant.get(variant)
        if f is None or f.status == "refused":
            continue
        top = max(f.sizes[1], f.extrapolate_to or 0)
        grid = np.geomspace(f.sizes[0], top, 80)
        d = None
        if f.form == "ND":  # the law along the largest tokens-per-parameter ratio (the prediction's)
            d = grid * (f.extrapolate_tokens / f.extrapolate_to) if f.extrapolate_to else None
            if d is None:
                continue
        if f.draws is not None and len(f.draws):
            curves = law(f.form, f.draws, grid, d)
            lo, hi = np.percentile(curves, [2.5, 97.5], axis=0)
            fig.add_trace(go.Scatter(x=np.concatenate([grid, grid[::-1]]), y=np.concatenate([hi, lo[::-1]]), fill="toself",
                                     fillcolor=colors[variant], opacity=0.2, line={"width": 0}, hoverinfo="skip",
                                     showlegend=False, legendgroup=variant))
        extra = f" + {f.B.value:.3g} / D^{f.beta.value:.3f}" if f.form == "ND" else ""
        fig.add_trace(go.Scatter(x=grid, y=f.predict(grid, d), mode="lines", legendgroup=variant, line={"color": colors[variant]},
                                 name=esc(f"{variant}: L = {f.E.value:.3f} + {f.A.value:.3g} / N^{f.alpha.value:.3f}{extra}")))
        if f.prediction is not None:
            p = f.prediction
            err = {} if p.lo is None else {"error_y": {"type": "data", "symmetric": False, "array": [p.hi - p.value],
                                                       "arrayminus": [p.value - p.lo]}}
            fig.add_trace(go.Scatter(x=[f.extrapolate_to], y=[p.value], mode="markers", legendgroup=variant,
                                     marker={"symbol": "star", "size": 12, "color": colors[variant]},
                                     name=esc(f"{variant} at {f.extrapolate_to:.3g}"), **err))
    return fig.update_layout(title="Loss against parameters, with each variant's fitted law (95% bootstrap band)",
                             xaxis_title="non-embedding parameters N", xaxis_type="log",
                             yaxis_title="validation loss (nats/token)", yaxis_type="log", height=450)


def _est(e) -> str:
    if e is None:
        return ""
    return f"{e.value:.4g}" if e.lo is None else f"{e.value:.4g} [{e.lo:.4g}, {e.hi:.4g}]"


def fits_table(fits: list, crossings: list) -> str:
    """The laws' parameters with their 95% intervals, the predictions and the crossings, as HTML."""
    rows = []
    for f in fits:
        if f.status == "refused":
            rows.append(f"<tr><td>{esc(f.variant)}</td><td colspan=6>no law: {esc(f.reason)}</td></tr>")
            continue
        at = f"{_est(f.prediction)} at {f.extrapolate_to:.3g}" if f.prediction is not None else ""
        rows.append(f"<tr><td>{esc(f.variant)}</td><td>{_est(f.E)}</td><td>{_est(f.A)}</td><td>{_est(f.alpha)}</td>"
                    f"<td>{f.n_points} ({f.n_runs} runs)</td><td>{esc(at)}</td><td>{esc(f.reason)}</td></tr>")
    cross = "".join(f"<li>{esc(c.variants[0])} vs {esc(c.variants[1])}: "
                    + (f"cross at {esc(_est(c.n))} parameters" if c.n is not None else esc(c.reason)) + "</li>"
                    for c in crossings)
    return ("<table class=\"fits\"><tr><th>variant</th><th>E</th><th>A</th><th>alpha</th><th>sizes</th>"
            "<th>prediction</th><th>note</th></tr>" + "".join(rows) + "</table>"
            + (f"<ul>{cross}</ul>" if cross else ""))


def effect_figure(effects: list[dict], metric: str, axis: str) -> go.Figure:
    """Each variant's paired difference from the base at every point of the axis, with its 95% CI
    over the seeds (workbench/analysis/effects.py)."""
    fig = go.Figure()
    colors = _colors([e["variant"] for e in effects])
    for e in effects:
        pts = [p for p in e["points"] if p["paired_delta"] is not None]
        ci = [p["paired_ci95"] or 0.0 for p in pts]
        fig.add_trace(go.Scatter(x=[p["point"] for p in pts], y=[p["paired_delta"] for p in pts], mode="lines+markers",
                                 name=esc(f"{e['variant']} minus {e['vs']}"), line={"color": colors[e["variant"]]},
                                 error_y={"type": "data", "array": ci, "visible": True}))
    fig.add_hline(y=0, line_dash="dash", line_color="gray")
    return fig.update_layout(title=f"Effect versus {axis}: paired difference in {metric} from the base, 95% CI over seeds",
                             xaxis_title=axis, xaxis_type="category", yaxis_title=f"delta {metric}", height=400,
                             showlegend=True)  # one trace too: the legend names the comparison
