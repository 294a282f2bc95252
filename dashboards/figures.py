"""Figures of one study from the frames of foxwb.workbench.analysis.runs: the ablation table (HTML, Table 3
layout, from templates/ablation.html.j2), per-position loss L(i) and P(l), training curves,
hyperparameter sensitivity, which heads forget, and parameter counts with throughput. Every string
from the store that plotly draws is escaped (plotly reads names as markup): names are data.

Every figure of a page takes its colours from one ``Colours``, so that a variant is drawn in one
colour on the whole page (and on every page of the study); each trace drawn in a variant's colour
names it in ``meta.colour_of`` (a bar trace: one name per bar), which the page's tests read."""
from __future__ import annotations

import html
import textwrap

import numpy as np
import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from foxwb.dashboards import render
from foxwb.workbench.analysis import stats, table
from foxwb.workbench.analysis.report import SPIKES, chosen_note, workers_cell
from foxwb.workbench.analysis.scaling.laws import LOSS as LADDER_LOSS
from foxwb.workbench.analysis.scaling.solve import law

# Table 3's column order, with the paper's names.
SLOT_NAMES = {"rope": "RoPE", "forget_gate": "Forget gate", "qk_norm": "QK-norm", "output_gate": "Output gate",
              "output_norm": "Output norm", "kv_shift": "KV-shift"}
SIGNIFICANCE = "the paired two-sided t-test against the base gives {p} < {alpha:g}"
BAND = "band: min to max over seeds"
# D3's ten, then ten darker ones (Vega's category20b/c): twenty variants before a colour repeats.
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
           "#756bb1", "#636363")
SUBTITLE_FONT = 13  # subplot titles, wrapped to their panel's width (wrap)


def esc(text) -> str:
    return html.escape(str(text), quote=True)


class Colours:
    """One colour per variant, assigned in the study's variant order (the design's, as tagged on the
    parent run: the same on every page of the study, whichever rows or figures a page has). A row at
    a search point ("FoX (Pro) [lr=0.003]") takes its variant's hue, darker to lighter by point, so
    that a variant's rows read as one family; a name the study does not list (an axis' cell) takes
    the next free colour, in the order asked."""

    def __init__(self, variants=(), rows: dict[str, str] | None = None):
        self.of: dict[str, str] = {}
        self.hues = 0
        for v in dict.fromkeys(variants):
            self(v)
        points: dict[str, list[str]] = {}
        for row, variant in (rows or {}).items():
            if row != variant:
                points.setdefault(variant, []).append(row)
        for variant, mine in points.items():
            # A variant that is a row itself (a confirmation row) keeps its own colour for that row.
            shades = list(np.linspace(-0.45, 0.45, len(mine) + 1) if variant in (rows or {}) else
                          np.linspace(-0.4, 0.4, len(mine)) if len(mine) > 1 else [0.0])
            if len(shades) > len(mine):
                shades.remove(min(shades, key=abs))
            for row, t in zip(mine, shades):
                self.of[row] = _shade(self(variant), float(t))

    def __call__(self, name: str) -> str:
        if name not in self.of:
            self.of[name] = PALETTE[self.hues % len(PALETTE)]
            self.hues += 1
        return self.of[name]


def _shade(colour: str, t: float) -> str:
    """``colour`` mixed with black (t < 0) or white (t > 0) by |t|."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    mixed = [c * (1 + t) if t < 0 else c + (255 - c) * t for c in rgb]
    return "#" + "".join(f"{round(c):02x}" for c in mixed)


def _rgba(colour: str, alpha: float) -> str:
    return f"rgba({int(colour[1:3], 16)},{int(colour[3:5], 16)},{int(colour[5:7], 16)},{alpha})"


def wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (plotly's <br>): a panel's
    title stays within its panel, clear of its neighbours'."""
    return "<br>".join(textwrap.wrap(text, max(8, width), break_long_words=False, break_on_hyphens=False)) or text


def _subtitles(fig: go.Figure) -> go.Figure:
    return fig.update_annotations(font_size=SUBTITLE_FONT)


def log_scaled(values, declared: str | None = None) -> bool:
    """Whether a searched field's values read on a log axis: as declared (``loguniform``: yes;
    ``uniform``: no), else from the values: positive numbers over a factor of 10 or more, or spaced
    evenly in log (a grid like 1e-3, 3e-3, 1e-2; two values a factor of 3 or more apart)."""
    if declared in ("loguniform", "uniform"):
        return declared == "loguniform"
    x = sorted({float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)})
    if len(x) < 2 or len(x) < len({str(v) for v in values}) or x[0] <= 0:
        return False
    if x[-1] / x[0] >= 10:
        return True
    if len(x) == 2:
        return x[1] / x[0] >= 3
    lin, log = np.diff(x), np.diff(np.log(x))
    return float(np.std(log) / np.mean(log)) < float(np.std(lin) / np.mean(lin))


# ---------------------------------------------------------------- the ablation table (HTML)

def _slot(slot: str, kind, options: dict | None) -> dict:
    """A slot's cell: a check for the kind the paper's presets use, the kind's name for any other,
    blank for none; beside it the options the row names (``options["shown"]``: a plug-in kind's,
    others set away from their default), every option on hover (site.component_options)."""
    if kind in (None, "none"):
        return {"kind": None, "standard": False, "options": [], "title": ""}
    every = ", ".join(f"{k}: {v}" for k, v in (options or {}).get("all", {}).items())
    return {"kind": kind, "standard": kind == table.STANDARD_KINDS[slot],
            "options": [f"{k}: {v}" for k, v in (options or {}).get("shown", {}).items()],
            "title": f"{kind} ({every})" if every else kind}


def _runs_text(r: dict) -> str:
    parts = [f"{r[k]} {k}" for k in ("finished", "failed", "killed", "running", "stopped", "to_run") if r.get(k)]
    return ", ".join(parts).replace("to_run", "to run")


def _spikes(r: dict) -> dict | None:
    if r.get("runs_spiked") is None:
        return None
    return {"mark": bool(r["runs_spiked"]), "text": f'{r["runs_spiked"]}/{r["finished"]}',
            "title": f'{r["grad_spikes"]} gradient-norm and {r["loss_spikes"]} loss spikes; largest gradient norm '
                     f'after warmup {r["grad_norm_max"]:#.3g}'}


def _delta(r: dict, alpha: float, p: float | None, p_label: str) -> dict:
    out = {"base": r["comparison"] == "base", "why": None, "value": None, "star": None, "vs": None, "paired": None}
    if out["base"]:
        return out
    if r["delta"] is None:
        return {**out, "why": "no base row at these searched values" if r["search_point"] else "no finished seeds to compare"}
    out.update(value=f'{r["delta"]:+.3f}', star=f"{p_label} = {p:.3g}" if p is not None and p < alpha else None,
               vs=f'vs {r["base_row"]} ({r["comparison"]})' if r["search_point"] else None)
    if r["paired_n"] and r["paired_ci95"] is not None:
        out["paired"] = {"label": "paired", "value": f'{r["paired_delta"]:+.3f}', "ci": f'{r["paired_ci95"]:.3f}',
                         "title": f'mean of the per-seed differences from {r["base_row"]}, {r["paired_n"]} seeds'}
    elif r.get("test") == "welch" and r.get("welch_ci95") is not None:
        out["paired"] = {"label": "Welch", "value": f'{r["delta"]:+.3f}', "ci": f'{r["welch_ci95"]:.3f}',
                         "title": f'Welch, unpaired: the difference of the means over {r["n_seeds"]} and '
                                  f'{r["base_n_seeds"]} seeds of {r["base_row"]}'}
    return out


def ablation_table(rows: pl.DataFrame, info: table.StudyInfo, metric: str = "val_ppl", holm: bool = True,
                   options: dict[str, dict[str, dict]] | None = None) -> str:
    """One row per table row (foxwb.workbench.analysis.table): the kind per slot (``options``:
    variant -> slot -> the kind's options, shown beside a kind the table names), parameters, seeds
    (marked when fewer than the study asks for), mean with 95% CI, delta vs the base with the
    paired comparison, p (Holm; ``holm`` False: unadjusted) and MDE, the runs by state (failures'
    reasons on hover), spikes, and the workers per trial where a row trains on several."""
    shown, p_label = [], "p (Holm)" if holm else "p (unadjusted)"
    for r in rows.iter_rows(named=True):
        p = r["p_holm"] if holm else r["p_unadjusted"]
        mine = (options or {}).get(r["variant"], {})
        shown.append({
            "row": r["row"], "chosen": r.get("chosen"),
            "slots": [_slot(s, r[f"slot.{s}"], mine.get(s)) for s in SLOT_NAMES],
            "params": f"{r['n_params']:,}" if r["n_params"] is not None else "",
            "seeds": f'{r["n_seeds"]}/{r["seeds_expected"]}' if r["fewer_seeds"] else str(r["n_seeds"]),
            "fewer": r["fewer_seeds"], "seeds_expected": r["seeds_expected"],
            "mean": f"{r['mean']:.3f}" if r["mean"] is not None else "",
            "ci": f"{r['ci95']:.3f}" if r["ci95"] is not None and r["mean"] is not None else None,
            "delta": _delta(r, info.alpha, p, p_label), "p": "" if p is None else f"{p:.3g}",
            "p_title": f"p (unadjusted) = {r['p_unadjusted']:.3g}" if holm and r["p_unadjusted"] is not None else None,
            "search": r.get("stage") == "search",
            "mde": "" if r["mde"] is None else f"{r['mde']:.3f}",
            "runs": _runs_text(r), "reasons": "\n".join(r["reasons"] or []), "spikes": _spikes(r),
            "workers": workers_cell(r.get("workers"))})
    several = any(w not in ("", "1") for w in (s["workers"] for s in shown))
    test = "paired or Welch" if "welch" in rows["test"].to_list() else "paired"
    # A tune-then-confirm study: its confirmation rows are the table, the search rows apart below it.
    groups = [("", [r for r in shown if not r["search"]]),
              ("Search, beside the table: the runs each point was chosen on (one seed each; the chosen point's "
               "row with the confirmation's seeds too)", [r for r in shown if r["search"]])] \
        if any(r["search"] for r in shown) else [("", shown)]
    return render("ablation.html.j2", groups=[g for g in groups if g[1]], slot_names=list(SLOT_NAMES.values()), metric=metric, base=info.base,
                  p_label=p_label, test=test, workers=several,
                  note=table_note(info, holm))


def table_note(info: table.StudyInfo, holm: bool) -> str:
    """The table's footnote, as text."""
    kinds = ", ".join(f"{s} {k}" for s, k in table.STANDARD_KINDS.items())
    chosen = chosen_note(info) if info.choice else ""
    p = ("p (Holm): the paired two-sided t-test (or Welch's, where the row says so) against the row it is compared "
         "with, Holm-adjusted over the distinct comparisons; p (unadjusted) on hover" if holm else
         "p (unadjusted): the paired two-sided t-test (or Welch's) against the row it is compared with, alone")
    return (f"Base: {info.base} ({info.base_from}). ✓: the kind the paper's presets use ({kinds}); another kind "
            "is named, with its options. CI: Student t over seeds; a seed count k/n: k finished where the study asks "
            f"for n. ★: {SIGNIFICANCE.format(p='p (Holm)' if holm else 'p (unadjusted)', alpha=info.alpha)}. {p}. "
            "Paired: the mean and 95% CI of the per-seed differences from the base (a seed fixes the data order of "
            "every variant), over the seeds both have. MDE: the smallest true difference the paired test detects "
            f"with 80% power at alpha {info.alpha:g}, given that spread and n (docs/statistics.md). With a search, "
            "a row is compared with the base at the same searched values, else a variant's best row (lowest mean "
            "val_loss) with the base's best, chosen on these runs. Runs: by state; hover a failure for its reason."
            + (f" {chosen[0].upper() + chosen[1:]}." if chosen else "")
            + f" ⚡ Spikes{SPIKES[len('spikes'):]}.")


# ---------------------------------------------------------------- curves

def _band(fig, x, ys: np.ndarray, name: str, color: str, row=None, col=None) -> None:
    """Mean line with a min-max band over seeds (ys: [seeds, points])."""
    where = {"row": row, "col": col} if row else {}
    lo, hi, mean = ys.min(0), ys.max(0), ys.mean(0)
    fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]), y=np.concatenate([hi, lo[::-1]]), fill="toself",
                             fillcolor=_rgba(color, 0.2), line={"width": 0, "color": color}, hoverinfo="skip",
                             showlegend=False, legendgroup=name, meta={"colour_of": name}), **where)
    fig.add_trace(go.Scatter(x=x, y=mean, name=esc(name), line={"color": color}, legendgroup=name,
                             showlegend=row in (None, 1) and col in (None, 1), meta={"colour_of": name}), **where)


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average; the ends average over what exists."""
    kernel = np.ones(window)
    return np.convolve(y, kernel, "same") / np.convolve(np.ones_like(y), kernel, "same")


def per_position_figure(curves: dict[str, np.ndarray], context: int, colours: Colours | None = None) -> go.Figure:
    """curves: variant -> [seeds, positions] of L(i). Left L(i) smoothed, right P(l) on log x."""
    colours = colours or Colours(curves)
    length = max(ys.shape[1] for ys in curves.values())  # rows may differ in context (a grid over it)
    window = max(1, (length // 64) | 1)
    fig = make_subplots(1, 2, subplot_titles=(wrap(f"L(i), centred moving average of {window} tokens; {BAND}", 40),
                                              "P(l) = exp(mean of L(1..l))"), horizontal_spacing=0.1)
    for name, ys in curves.items():
        x = np.arange(1, ys.shape[1] + 1)
        _band(fig, x, np.stack([smooth(y, window) for y in ys]), name, colours(name), 1, 1)
        _band(fig, x, np.exp(np.cumsum(ys, 1) / x), name, colours(name), 1, 2)
    for col in (1, 2):
        fig.add_vline(x=context, line_dash="dash", line_color="gray", row=1, col=col)
    # Inside the plot, under its top edge: clear of the panel's title above it.
    fig.add_annotation(x=context, y=0.98, yref="paper", yanchor="top", text="training length", showarrow=False,
                       xanchor="left", font_size=11)
    fig.update_xaxes(title_text="position i (tokens)", row=1, col=1)
    fig.update_xaxes(title_text="context length l (tokens)", type="log", row=1, col=2)
    fig.update_yaxes(title_text="loss (nats/token)", row=1, col=1)
    fig.update_yaxes(title_text="perplexity", row=1, col=2)
    # Room above the panels' titles for a title of the caller's (scripts/reproduction.py gives one).
    return _subtitles(fig).update_layout(height=460, margin={"t": 100})


KEPT_HISTORY_TITLE = "Share of causal pairs pruning keeps, during training"
KEPT_HISTORY_NOTE = ("acp_kept_fraction, logged at every validation by each model with forget gates: the share of causal "
             "pairs adaptive computation pruning keeps on the first held-out sequence, at the model's ln eps or, "
             "where pruning is off, at -10 (what it would keep). It rises as the gates learn to forget.")
_CURVE_LABELS = {"val_loss": ("Validation loss during training", "validation loss (nats/token)"),
                 "acp_kept_fraction": ("Share of causal pairs kept", "share of causal pairs kept")}


def training_curves_figure(curves: dict[str, tuple[np.ndarray, np.ndarray]], metric: str = "val_loss",
                           colours: Colours | None = None) -> go.Figure:
    """curves: row -> (tokens, [seeds, points] of ``metric``'s history)."""
    colours = colours or Colours(curves)
    fig = go.Figure()
    for name, (tokens, ys) in curves.items():
        _band(fig, tokens, ys, name, colours(name))
    title, axis = _CURVE_LABELS.get(metric, (f"{metric} during training", metric))
    return fig.update_layout(title=f"{title}; {BAND}", xaxis_title="training tokens", yaxis_title=axis, height=400)


# ---------------------------------------------------------------- hyperparameter sensitivity

SENSITIVITY_NOTE = ("Per variant and searched value: the mean over seeds of the final {metric}, with its 95% CI "
                    "(Student t; none at a value one seed ran), each seed's value a faint dot behind it; a line per "
                    "variant (dashed: at other values of the other searched fields). Log axes where the field was "
                    "searched log-uniformly (or over a log grid). Runs ASHA stopped early are left out: their last "
                    "validation is not a final value.")


def sensitivity_figure(points: pl.DataFrame, metric: str = "val_loss", colours: Colours | None = None,
                       log: frozenset[str] | set[str] = frozenset(), order: list[str] | None = None) -> go.Figure:
    """points: variant, param, value, ``metric`` (one row per finished search trial and searched
    field), and where known seed and rest (the trial's values of the other searched fields: a line
    per variant and rest). A panel per searched field (``log``: those on a log axis); per variant,
    per searched value, the mean over seeds with its 95% CI as error bars, the seeds faint behind."""
    if "rest" not in points.columns:
        points = points.with_columns(pl.lit("").alias("rest"))
    variants = list(dict.fromkeys([*(order or []), *points["variant"].to_list()]))
    colours = colours or Colours(variants)
    params = points["param"].unique(maintain_order=True).to_list()
    cols = min(3, len(params))
    rows = -(-len(params) // cols)
    fig = make_subplots(rows, cols, subplot_titles=[wrap(esc(p), 90 // cols) for p in params] if len(params) > 1 else None,
                        horizontal_spacing=0.08, vertical_spacing=0.2)
    for i, param in enumerate(params):
        where = {"row": i // cols + 1, "col": i % cols + 1}
        mine = points.filter(pl.col("param") == param)
        numeric = all(isinstance(v, (int, float)) for v in mine["value"].to_list())
        for variant in [v for v in variants if v in set(mine["variant"].to_list())]:
            colour = colours(variant)
            of_variant = mine.filter(pl.col("variant") == variant)
            for k, rest in enumerate(of_variant["rest"].unique(maintain_order=True).to_list()):
                line = of_variant.filter(pl.col("rest") == rest)
                _sensitivity_traces(fig, line, param, variant, rest, k, colour, metric, numeric, where, first=i == 0)
        fig.update_xaxes(title_text=esc(param), type=("log" if param in log else "linear") if numeric else "category", **where)
        fig.update_yaxes(title_text=f"{metric} (nats/token)" if metric.endswith("loss") else metric, **where)
    return _subtitles(fig).update_layout(height=max(380, 330 * rows + 60), margin={"t": 60 if len(params) > 1 else 30})


def _sensitivity_traces(fig, line: pl.DataFrame, param: str, variant: str, rest: str, k: int, colour: str,
                        metric: str, numeric: bool, where: dict, first: bool) -> None:
    """One variant's line in one panel: the seeds faint, then the means with their CIs."""
    seeds = line["seed"].to_list() if "seed" in line.columns else [None] * line.height
    label = f"{variant} ({rest})" if rest else variant
    fig.add_trace(go.Scatter(x=line["value"].to_list(), y=line[metric].to_list(), mode="markers", showlegend=False,
                             legendgroup=variant, marker={"color": colour, "size": 6, "opacity": 0.3},
                             customdata=seeds, meta={"colour_of": variant, "role": "seed", "param": param},
                             hovertemplate=f"{esc(label)}, seed %{{customdata}}<br>%{{x}}: %{{y:.4f}}<extra></extra>"),
                  **where)
    xs, means, halves, hover = [], [], [], []
    keyed = sorted(line.group_by("value", maintain_order=True).agg(pl.col(metric)).iter_rows(),
                   key=lambda r: r[0] if numeric else str(r[0]))
    for value, ys in keyed:
        ci = stats.mean_ci(ys)
        xs.append(value)
        means.append(ci.mean)
        halves.append(ci.half_width)
        interval = f" ± {ci.half_width:.4f} (95% CI, {ci.n} seeds)" if ci.half_width is not None else " (1 seed)"
        hover.append(f"{esc(label)}<br>{esc(param)} = {value:.4g}: mean {ci.mean:.4f}{interval}" if numeric else
                     f"{esc(label)}<br>{esc(param)} = {esc(value)}: mean {ci.mean:.4f}{interval}")
    fig.add_trace(go.Scatter(x=xs, y=means, mode="lines+markers", name=esc(label), legendgroup=variant, showlegend=first,
                             line={"color": colour, "dash": "solid" if k == 0 else "dash"},
                             marker={"color": colour, "size": 8},
                             error_y={"type": "data", "array": halves, "visible": True, "thickness": 1.5, "width": 5},
                             text=hover, hovertemplate="%{text}<extra></extra>",
                             meta={"colour_of": variant, "role": "mean", "param": param}), **where)


# ---------------------------------------------------------------- seeds, heads, cost

SEEDS_TITLE = "Seed spread: each seed's {metric} against its row's mean"


def seeds_figure(values: dict[str, dict[int, float]], order: list[str], metric: str = "val_ppl",
                 colours: Colours | None = None) -> go.Figure:
    """values: row -> {seed: metric} (foxwb.workbench.analysis.table.row_seed_values). A box per row in ``order``
    with every seed a dot, at its difference from the row's mean in % of that mean, so that rows of
    very different levels share one axis; the row's label carries n and the sd in %. The spread
    the power analysis reads is that of paired differences, which a seed effect shared by the rows
    makes smaller than these."""
    colours = colours or Colours(order)
    fig = go.Figure()
    for row in order:
        seeds = values.get(row) or {}
        if not seeds:
            continue
        xs = np.array(list(seeds.values()), dtype=float)
        mean = xs.mean()
        rel = 100 * (xs / mean - 1) if mean else np.zeros_like(xs)
        sd = f", sd {100 * xs.std(ddof=1) / abs(mean):.1f}%" if len(xs) > 1 and mean else ""
        label = f"{wrap(esc(row), 24)}<br>n={len(xs)}{sd}"
        fig.add_trace(go.Box(y=rel.tolist(), x=[label] * len(xs), name=esc(row), boxpoints="all", jitter=0.4, pointpos=0,
                             marker={"color": colours(row), "size": 6}, line={"color": colours(row)}, showlegend=False,
                             legendgroup=row, meta={"colour_of": row},
                             customdata=[[seed, value] for seed, value in seeds.items()],
                             hovertemplate="seed %{customdata[0]}: %{customdata[1]:.4g} (%{y:+.2f}%)<extra></extra>"))
    return fig.update_layout(title=SEEDS_TITLE.format(metric=metric), yaxis_title=f"{metric}, % from the row's mean",
                             yaxis_zeroline=True, height=440)


KEPT_TITLE = "attention kept (pruning threshold)"
HEADS_TITLE = "Which heads forget"
HEADS_NOTE = ("The share of causal pairs above pruning's threshold (ln eps = {log_eps:g}), per layer and head, mean over "
              "seeds. Dark: the head forgets within a few tokens; light: it keeps most of the sequence.")


def forgetting_heads_figure(maps: dict[str, np.ndarray], log_eps: float | None = None) -> go.Figure:
    """maps: variant -> (layers, heads) share of causal pairs above pruning's threshold (mean over
    seeds; HEADS_NOTE says so beside the figure). Dark: the head forgets within a few tokens;
    light: it keeps most of the sequence."""
    names = list(maps)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig = make_subplots(rows, cols, subplot_titles=[wrap(esc(n), 100 // cols) for n in names], horizontal_spacing=0.07,
                        vertical_spacing=0.16)
    for i, name in enumerate(names):
        z = maps[name]
        fig.add_trace(go.Heatmap(z=z.tolist(), x=list(range(z.shape[1])), y=list(range(z.shape[0])), zmin=0, zmax=1,
                                 colorscale="Viridis", showscale=i == 0, colorbar={"title": "share kept" if log_eps is None
                                                                              else f"share kept<br>(ln eps {log_eps:g})"},
                                 hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
        fig.update_xaxes(title_text="head", dtick=1, row=i // cols + 1, col=i % cols + 1)
        fig.update_yaxes(title_text="layer", dtick=1, autorange="reversed", row=i // cols + 1, col=i % cols + 1)
    return _subtitles(fig).update_layout(height=320 * rows + 60, margin={"t": 60})


MEMORY_KEYS = ("peak_memory_train_mb", "peak_memory_eval_mb", "peak_rss_mb")
MEMORY_NAMES = {"peak_memory_train_mb": "GPU, training", "peak_memory_eval_mb": "GPU, evaluation",
                "peak_rss_mb": "host (peak RSS)"}


def _has(frame: pl.DataFrame, key: str) -> bool:
    return key in frame.columns and frame[key].drop_nulls().len() > 0


def cost_panels(per_variant: pl.DataFrame) -> tuple[list[tuple[list[str], str]], list[str]]:
    """The cost figure's panels with data, as (keys, title), and a sentence for each usual one left
    out for want of data (MFU and GPU use on a machine without a GPU)."""
    panels, absent = [], []
    for key, title in (("n_params", "parameters"), ("tokens_per_s", "throughput (tokens/s)")):
        if _has(per_variant, key):
            panels.append(([key], title))
        else:
            absent.append(f"{title[0].upper()}{title[1:]}: no run records it.")
    if _has(per_variant, "mfu"):
        panels.append((["mfu"], "MFU"))
    else:
        absent.append("MFU: no run records it (it divides by a GPU's peak FLOP/s; these runs had none).")
    if _has(per_variant, "acp_kept_fraction"):
        panels.append((["acp_kept_fraction"], KEPT_TITLE))
    gpu_memory = [k for k in MEMORY_KEYS[:2] if _has(per_variant, k)]
    if gpu_memory:
        panels.append((gpu_memory, "peak memory (MB)"))
    elif _has(per_variant, "peak_rss_mb"):
        panels.append((["peak_rss_mb"], "peak memory (MB, host: no GPU)"))
        absent.append("GPU memory: no run records it (no GPU); the memory panel shows the host's peak resident set.")
    if _has(per_variant, "gpu_utilization_mean"):
        panels.append((["gpu_utilization_mean"], "GPU utilisation (%, mean)"))
    else:
        absent.append("GPU utilisation: no run records it (no GPU, or no NVML driver).")
    return panels, absent


def cost_figure(per_variant: pl.DataFrame, colours: Colours | None = None) -> go.Figure:
    """per_variant: variant, n_params, tokens_per_s, mfu and, where recorded (means over seeds):
    acp_kept_fraction (the share of causal pairs above adaptive computation pruning's threshold,
    what pruning would compute; small: fast-forgetting heads), peak memory in MB (the GPU
    allocator's peak in training and in evaluation side by side; without a GPU the process's peak
    resident set) and gpu_utilization_mean (%, NVML's utilisation sampled during the trial). A
    panel per measure with data (cost_panels says which are left out), at most three to a row; a
    bar per variant in its colour, named in the legend."""
    names = per_variant["variant"].to_list()
    colours = colours or Colours(names)
    panels, _ = cost_panels(per_variant)
    cols = 2 if len(panels) == 4 else min(3, len(panels))  # rows filled evenly: 2 + 2, 3 + 2, 3 + 3
    rows = -(-len(panels) // cols)
    fig = make_subplots(rows, cols, subplot_titles=[wrap(t, 78 // cols) for _, t in panels], horizontal_spacing=0.1,
                        vertical_spacing=0.22)
    for i, (keys, _) in enumerate(panels):
        where = {"row": i // cols + 1, "col": i % cols + 1}
        for j, name in enumerate(names):
            fig.add_trace(go.Bar(x=[MEMORY_NAMES[k] if len(keys) > 1 else k for k in keys],
                                 y=[per_variant[k][j] for k in keys], name=esc(name), legendgroup=name,
                                 showlegend=i == 0, marker={"color": colours(name)}, meta={"colour_of": name, "keys": keys},
                                 hovertemplate=f"{esc(name)}<br>%{{x}}: %{{y:.4g}}<extra></extra>"), **where)
        fig.update_xaxes(showticklabels=len(keys) > 1, **where)
    return _subtitles(fig).update_layout(height=300 * rows + 80, margin={"t": 50}, barmode="group")


# ---------------------------------------------------------------- scaling and effects

def scaling_figure(ladder: pl.DataFrame, fits: list, order: list[str], colours: Colours | None = None) -> go.Figure:
    """Loss against non-embedding parameters (log-log): every run as a marker, each variant's fitted
    law over its ladder and on to its extrapolation with the 95% band of the bootstrap refits, the
    prediction marked with its interval."""
    colours = colours or Colours(order)
    fig = go.Figure()
    by_variant = {f.variant: f for f in fits}
    for variant in order:
        mine = ladder.filter(pl.col("variant") == variant)
        if mine.is_empty():
            continue
        colour, tag = colours(variant), {"colour_of": variant}
        fig.add_trace(go.Scatter(x=mine["n_params_non_embedding"].to_list(), y=mine[LADDER_LOSS].to_list(), mode="markers",
                                 name=esc(f"{variant} (runs)"), marker={"color": colour}, legendgroup=variant, meta=tag))
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
                                     fillcolor=_rgba(colour, 0.2), line={"width": 0, "color": colour}, hoverinfo="skip",
                                     showlegend=False, legendgroup=variant, meta=tag))
        extra = f" + {f.B.value:.3g} / D^{f.beta.value:.3f}" if f.form == "ND" else ""
        fig.add_trace(go.Scatter(x=grid, y=f.predict(grid, d), mode="lines", legendgroup=variant, line={"color": colour},
                                 name=esc(f"{variant}: L = {f.E.value:.3f} + {f.A.value:.3g} / N^{f.alpha.value:.3f}{extra}"),
                                 meta=tag))
        if f.prediction is not None:
            p = f.prediction
            err = {} if p.lo is None else {"error_y": {"type": "data", "symmetric": False, "array": [p.hi - p.value],
                                                       "arrayminus": [p.value - p.lo]}}
            fig.add_trace(go.Scatter(x=[f.extrapolate_to], y=[p.value], mode="markers", legendgroup=variant, meta=tag,
                                     marker={"symbol": "star", "size": 12, "color": colour},
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
    rows = [{"variant": f.variant, "refused": f.status == "refused", "reason": f.reason, "E": _est(f.E), "A": _est(f.A),
             "alpha": _est(f.alpha), "sizes": f"{f.n_points} ({f.n_runs} runs)",
             "at": f"{_est(f.prediction)} at {f.extrapolate_to:.3g}" if f.prediction is not None else ""}
            for f in fits]
    cross = [f"{c.variants[0]} vs {c.variants[1]}: " + (f"cross at {_est(c.n)} parameters" if c.n is not None else c.reason)
             for c in crossings]
    return render("fits.html.j2", rows=rows, crossings=cross)


def effect_figure(effects: list[dict], metric: str, axis: str, colours: Colours | None = None) -> go.Figure:
    """Each variant's paired difference from the base at every point of the axis, with its 95% CI
    over the seeds (workbench/analysis/effects.py)."""
    colours = colours or Colours([e["variant"] for e in effects])
    fig = go.Figure()
    for e in effects:
        pts = [p for p in e["points"] if p["paired_delta"] is not None]
        ci = [p["paired_ci95"] or 0.0 for p in pts]
        fig.add_trace(go.Scatter(x=[p["point"] for p in pts], y=[p["paired_delta"] for p in pts], mode="lines+markers",
                                 name=esc(f"{e['variant']} minus {e['vs']}"), line={"color": colours(e["variant"])},
                                 legendgroup=e["variant"], meta={"colour_of": e["variant"]},
                                 error_y={"type": "data", "array": ci, "visible": True}))
    fig.add_hline(y=0, line_dash="dash", line_color="gray")
    return fig.update_layout(title=wrap(f"Effect versus {axis}: paired difference in {metric} from the base, 95% CI "
                                        "over seeds", 90),
                             xaxis_title=axis, xaxis_type="category", yaxis_title=f"delta {metric}", height=400,
                             showlegend=True)  # one trace too: the legend names the comparison
