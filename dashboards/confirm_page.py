"""Tune, then confirm on a study's page (workbench/run/confirm.py): per variant, its search trials'
metric against each searched value, the chosen point marked and the confirmation runs at it,
each kind of point drawn its own way, and the choice in words beside the figure.

- **Search trials**: the variant's FINISHED search runs that ran to the end (the runs the choice
  is made from); those ASHA stopped early are drawn apart, at their last validation, which is not
  a final value and was never a candidate.
- **Chosen**: the point recorded on the study's parent run (``confirm_choice``), at the mean of
  the metric over its search seeds, the value it was chosen on.
- **Confirmation runs**: the variant's runs at the chosen point on the confirmation seeds, the
  study table's row of the variant; a search trial on a confirmation seed is one of them (the
  same trial, run once), and says so on hover.
"""
from __future__ import annotations

import json

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from foxwb.dashboards import render
from foxwb.dashboards.figures import SUBTITLE_FONT, Colours, esc, log_scaled, wrap
from foxwb.workbench.analysis import stats
from foxwb.workbench.run.confirm import STAGE
from foxwb.workbench.run.live_view import count

SEARCH, STOPPED, CHOSEN, CONFIRMATION = ("search trial", "search trial stopped early by ASHA (its last validation)",
                                         "chosen point (mean over its search seeds)", "confirmation run")
# Each kind of point drawn its own way; a search trial and a confirmation run in their variant's
# colour (the page's Colours), the stopped ones grey, the chosen point gold. The legend's markers
# are grey where the colour is the variant's: the panel's title names the variant.
MARKERS = {SEARCH: {"symbol": "circle", "size": 9},
           STOPPED: {"symbol": "x-thin-open", "color": "#999999", "size": 9, "line": {"width": 2}},
           CHOSEN: {"symbol": "star", "color": "#daa520", "size": 18, "line": {"width": 1, "color": "#7a5c00"}},
           CONFIRMATION: {"symbol": "diamond-open", "size": 13, "line": {"width": 2}}}
LEGEND_GREY = "#555555"
TITLE = "Search and confirmation"


def choice_of(tags: dict) -> tuple[dict, list[int], str]:
    """(variant -> its recorded choice, the confirmation seeds, the metric) from the parent's tags."""
    return (json.loads(tags.get("confirm_choice", "{}")), json.loads(tags.get("confirm_seeds", "[]")),
            tags.get("confirm_metric", "val_loss"))


def points(store, runs: list, tags: dict) -> list[dict]:
    """One entry per finished run, name it counts for (an alias counts for its name too) and
    searched path: variant, path, value, y (the confirmation metric), seed, kind (SEARCH, STOPPED
    or CONFIRMATION; a search trial on a confirmation seed at the chosen point is both) and, for
    a stopped one, the tokens of its last validation."""
    choice, seeds, metric = choice_of(tags)
    out = []
    for r in runs:
        t = r.data.tags
        if r.info.status != "FINISHED" or metric not in r.data.metrics or not t.get("search_values"):
            continue
        stopped, searched = t.get("stopped_early") == "true", t.get("stage") != STAGE
        tokens = None
        if stopped:
            history = store.client.get_metric_history(r.info.run_id, metric)
            tokens = max((m.step for m in history), default=None)
        chosen = choice.get(t["variant"], {}).get("point")  # an alias has the choice of the variant it trains as
        kinds = [STOPPED if stopped else SEARCH] if searched else []
        if not stopped and chosen is not None and t.get("search_point") == chosen and int(t["seed"]) in seeds:
            kinds.append(CONFIRMATION)
        for name in [t["variant"], *json.loads(t.get("aliases", "[]"))]:
            for kind in kinds:
                for path, value in json.loads(t["search_values"]).items():
                    out.append({"variant": name, "trained_as": t["variant"], "path": path, "value": value,
                                "y": r.data.metrics[metric], "seed": int(t["seed"]), "kind": kind,
                                "also_search": searched, "tokens": tokens})
    return out


def _hover(p: dict) -> str:
    value = f"{p['value']:.4g}" if isinstance(p["value"], (int, float)) else esc(p["value"])
    text = f"{esc(p['variant'])}, seed {p['seed']}<br>{esc(p['path'].split('.')[-1])} = {value}<br>%{{y:.4f}}"
    if p["kind"] == STOPPED:
        text += "<br>stopped early by ASHA" + (f" at {p['tokens']:,} tokens" if p["tokens"] is not None else "")
    if p["kind"] == CONFIRMATION:
        text += "<br>confirmation run" + (" (a search trial too: the same trial)" if p["also_search"] else "")
    return text + "<extra></extra>"


CAPTION = ("Each variant's search: the final {metric} of every search trial against the searched value, the chosen "
           "point and the confirmation runs; log axes where the field was searched log-uniformly.")


def figure(found: list[dict], choice: dict, order: list[str], metric: str, colours: Colours | None = None,
           log: frozenset[str] | set[str] | None = None) -> go.Figure:
    """A panel per variant and searched path: the search trials, the stopped ones, the chosen
    point and the confirmation runs, in a legend shared by every panel. ``log``: the paths on a log
    axis (default: figures.log_scaled of each path's values, all variants together, so that the
    panels of one path share their axis type)."""
    colours = colours or Colours(order)
    panels = list(dict.fromkeys((p["variant"], p["path"]) for p in sorted(
        found, key=lambda p: order.index(p["variant"]) if p["variant"] in order else len(order))))
    if log is None:
        log = {path for _, path in panels if log_scaled([p["value"] for p in found if p["path"] == path])}
    several = len({path for _, path in panels}) > 1
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    titles = [wrap(esc(f"{v}: {path}" if several else v), 90 // cols) for v, path in panels]
    fig = make_subplots(rows, cols, subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.22)
    for kind in MARKERS:  # the legend, one grey entry per kind (no point: nothing drawn)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=kind, legendgroup=kind,
                                 marker={"color": LEGEND_GREY, **MARKERS[kind]}, legendrank=list(MARKERS).index(kind),
                                 hoverinfo="skip", meta={"legend": kind}), row=1, col=1)
    for i, (variant, path) in enumerate(panels):
        where = {"row": i // cols + 1, "col": i % cols + 1}
        mine = [p for p in found if p["variant"] == variant and p["path"] == path]
        chosen = choice.get(mine[0]["trained_as"])
        layers = []  # the star first: the runs at the chosen point are drawn over it
        if chosen is not None and path in chosen["values"]:
            layers.append((CHOSEN, [{"value": chosen["values"][path], "y": chosen["mean"], "n": chosen["n_seeds"]}]))
        layers += [(kind, [p for p in mine if p["kind"] == kind]) for kind in (SEARCH, STOPPED, CONFIRMATION)]
        for kind, pts in layers:
            if not pts:
                continue
            hover = ([f"{esc(variant)}: chosen {esc(chosen['point'])}<br>{metric} %{{y:.4f}}, mean over "
                      f"{count(pts[0]['n'], 'search seed')}<extra></extra>"] if kind == CHOSEN else [_hover(p) for p in pts])
            marker, meta = dict(MARKERS[kind]), {"variant": variant, "path": path, "kind": kind}
            if "color" not in marker:  # drawn in the variant's colour
                marker["color"] = colours(variant)
                meta["colour_of"] = variant
            fig.add_trace(go.Scatter(x=[p["value"] for p in pts], y=[p["y"] for p in pts], mode="markers",
                                     name=kind, legendgroup=kind, showlegend=False, marker=marker,
                                     hovertemplate=hover, meta=meta), **where)
        fig.update_xaxes(title_text=esc(path), type="log" if path in log else None, **where)
        fig.update_yaxes(title_text=f"{metric} (nats/token)" if metric == "val_loss" else metric, **where)
    # The legend under the panels, in the figure's own bottom margin: clear of the axes' titles.
    return fig.update_annotations(font_size=SUBTITLE_FONT).update_layout(
        height=330 * rows + 150, margin={"t": 50, "b": 150},
        legend={"orientation": "h", "yref": "container", "y": 0.01, "yanchor": "bottom", "x": 0})


def summary(found: list[dict], choice: dict, seeds: list[int], order: list[str], metric: str) -> str:
    """The choice in words, per variant: what it was chosen from, on what, and what confirmed it."""
    items = []
    for variant in [v for v in order if any(p["variant"] == v for p in found)]:
        mine = [p for p in found if p["variant"] == variant]
        mine = [p for p in mine if p["path"] == mine[0]["path"]]  # one entry per run
        n_search, n_stopped = (sum(p["kind"] == kind for p in mine) for kind in (SEARCH, STOPPED))
        c = choice.get(mine[0]["trained_as"])
        if c is None:
            items.append({"variant": variant, "point": None, "searched": count(n_search, "search trial")})
            continue
        confirmed = {p["seed"]: p["y"] for p in mine if p["kind"] == CONFIRMATION}
        ci = stats.mean_ci(confirmed.values())
        runs = ", ".join(f"seed {s}: {confirmed[s]:.4f}" for s in sorted(confirmed)) or "none finished yet"
        if ci.n:
            runs += f"; mean {ci.mean:.4f}" + (f" ± {ci.half_width:.4f} (95% CI)" if ci.half_width is not None else "")
        waiting = [s for s in seeds if s not in confirmed]
        if waiting and confirmed:
            runs += f" (seed {', '.join(map(str, waiting))} not finished)"
        items.append({"variant": variant, "point": c["point"],
                      "chosen_on": f"{metric} {c['mean']:.4f}, mean over {count(c['n_seeds'], 'search seed')}",
                      "searched": count(n_search, "search trial"), "stopped": n_stopped,
                      "seeds": f"{'seed' if len(seeds) == 1 else 'seeds'} {', '.join(map(str, seeds))}", "runs": runs})
    return render("confirm.html.j2", choices=items)
