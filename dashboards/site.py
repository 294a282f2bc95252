"""The dashboard site: a static, self-contained folder (index.html, one page per study, one copy of
plotly.js) built from the tracking store; it works offline and from file://."""
from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import numpy as np
import plotly.io as pio
import polars as pl
from plotly.offline import get_plotlyjs

from foxwb.dashboards import claims_table, confirm_page, figures
from foxwb.dashboards.figures import esc
from foxwb.workbench.analysis import runs as results
from foxwb.workbench.analysis import fairness, status, table
from foxwb.workbench.analysis.claims import declared, study_claims
from foxwb.workbench.analysis.effects import effects, grid_effects
from foxwb.workbench.analysis.scaling.laws import fit_study
from foxwb.workbench.run.tracking import Store
from foxwb.workbench.spec.seed_plan import SeedPlan

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table.ablation,table.claims{border-collapse:collapse;font-size:14px}
table.ablation td,table.ablation th,table.claims td,table.claims th{border-bottom:1px solid #ddd;padding:4px 8px}
td.num{text-align:right;font-variant-numeric:tabular-nums}td.mark{text-align:center}.sig{color:#b8860b}.note{color:#666;font-size:13px}
td.failed,.fewer{color:#b22222}.spike{color:#d2691e}.kind{font-size:12px;font-weight:600}.vs{color:#666;font-size:12px}
section{margin:2em 0}h2{font-size:18px}"""
# Collects script errors from the first line on, for people and for the browser test alike.
ERRORS = "<script>window.__wb_errors=[];addEventListener('error',function(e){window.__wb_errors.push(String(e.message))});</script>"


def page_name(study: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", study).strip("-")[:40] or "study"
    return f"study-{slug}-{hashlib.sha1(study.encode()).hexdigest()[:8]}.html"


def _script_json(fig) -> str:
    # Inside <script>, "</" could close the tag: a name like "</script>" must stay data.
    return pio.to_json(fig, validate=False).replace("</", "<\\/").replace("<!--", "<\\!--")


class Page:
    def __init__(self, title: str):
        self.title, self.parts, self.scripts, self.n = title, [], [], 0

    def html(self, text: str) -> None:
        self.parts.append(text)

    def figure(self, fig) -> None:
        self.n += 1
        div = f"fig-{self.n}"
        self.parts.append(f'<div id="{div}" class="wb-figure"></div>')
        self.scripts.append(f'(function(){{var f={_script_json(fig)};Plotly.newPlot("{div}",f.data,f.layout,'
                            '{"responsive":true,"displaylogo":false});})();')

    def render(self) -> str:
        return (f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(self.title)}</title>{ERRORS}'
                f'<script src="plotly.min.js"></script><style>{STYLE}</style></head><body>'
                f'<nav><a href="index.html">All studies</a></nav>{"".join(self.parts)}'
                f'<script>{"".join(self.scripts)}</script></body></html>')


def study_page(store: Store, study: str) -> tuple[str, dict]:
    attempts = results.all_runs(store, study)
    runs = [r for r in attempts if r.info.status == "FINISHED"]
    parent = results.study_parent(store, study)
    tags = parent.data.tags if parent else {}
    page = Page(f"{study} · FoX ablation workbench")
    page.html(f"<h1>{esc(study)}</h1><p>{esc(tags.get('mlflow.note.content', ''))}</p>")
    everything = results.trial_runs(Path("."), study, runs=attempts)
    everything = results.with_test_documents(store, everything, attempts)  # the claims' seed x document interval
    if everything.is_empty():
        page.html("<p>No trials tracked yet.</p>")
        return page.render(), {"variants": 0, "runs": 0}
    # One definition of the base, the order and the rows, as `wb results` (foxwb.workbench.analysis.table).
    info = table.study_info(study, everything, parent_tags=tags)
    metric = table.report_metric(everything)  # the test split's, as `wb results` (docs/trials-and-data.md, "Three splits")
    rows = table.study_table(everything, info, metric)
    # The claims' verdicts first, as `wb results` prints them (the declared claims, as tagged, else the default ones).
    plan = SeedPlan.model_validate_json(tags["seed_plan"]) if tags.get("seed_plan") else None
    verdicts = study_claims(everything, info, declared(tags=tags), plan=plan)
    page.html('<section id="claims"><h2>Claims</h2>' + claims_table.html(verdicts, info.alpha) + "</section>")
    page.html("<section><h2>Ablation table</h2>" + split_html(everything, metric)
              + figures.ablation_table(rows, info, metric) + "</section>")
    if info.choice:  # tune, then confirm: each variant's search beside the table
        confirm_section(page, store, attempts, tags, info)
    fairness_section(page, attempts, tags)  # what each row searched and set: after the table and its search
    seeds_section(page, everything, rows, info, metric)
    if info.design_kind == "scaling":
        scaling_section(page, everything, info)
    effect_sections(page, everything, info)
    # Each trial once: a confirmation row and its chosen search point, or an alias, share trials.
    final = list(status.final_statuses(attempts).values())
    summary = {"variants": rows["variant"].n_unique(), "runs": len(runs), "base": info.base,
               "finished": final.count("FINISHED"), "failed": final.count("FAILED") + final.count("KILLED"),
               "date": time.strftime("%Y-%m-%d", time.gmtime(parent.info.start_time / 1000)) if parent else "",
               "best": _best(rows)}
    frame = table.normalise(everything.filter(pl.col("status") == "FINISHED"))
    if frame.is_empty():
        page.html("<p>No finished trials yet.</p>")
        return page.render(), summary
    order = rows.filter(pl.col("n_seeds") > 0)["row"].to_list()
    curve_sections(page, store, runs, frame, order, sensitivity=not info.choice)
    cost_section(page, frame, info.order)
    page.html(f'<p class="note">{frame.height} finished trial rows from {len(runs)} finished runs '
              f"({len(attempts)} tracked); every number on this page is read from the tracking store.</p>")
    return page.render(), {**summary, "figures": page.n}


def split_html(runs: pl.DataFrame, metric: str) -> str:
    """Which documents the table's metric was read on (the test set's size), and a loud line where a
    run's test set is below the default minimum (docs/trials-and-data.md, "Three splits")."""
    note, small = table.split_note(runs, metric), table.small_test_sets(runs)
    return ((f'<p class="fewer"><b>{esc(small)}</b></p>' if small else "")
            + (f'<p class="note">{esc(note)}</p>' if note else ""))


def seeds_section(page: Page, runs: pl.DataFrame, rows: pl.DataFrame, info: table.StudyInfo, metric: str) -> None:
    """Each row's seeds as dots around its mean: where one seed runs far from the rest, and which rows
    need many seeds for a small effect. The rows with two seeds or more (a search point on one seed
    has no spread)."""
    spread = rows.filter(pl.col("n_seeds") > 1)["row"].to_list() if not rows.is_empty() else []
    if not spread:
        return
    page.html("<section><h2>Seed spread</h2>")
    page.figure(figures.seeds_figure(table.row_seed_values(runs, info, metric), spread, metric))
    page.html(f'<p class="note">{metric} of every finished seed, in % from its row\'s mean; the rows\' seeds needed for '
              "an effect are <code>wb run STUDY --dry-run --effect 0.02</code> (docs/statistics.md).</p></section>")


def confirm_section(page: Page, store: Store, runs: list, tags: dict, info: table.StudyInfo) -> None:
    """Tune, then confirm: per variant its search, the chosen point and the confirmation runs
    (dashboards/confirm_page.py)."""
    choice, seeds, metric = confirm_page.choice_of(tags)
    if info.design_kind == "crossed":
        # Chosen per cell (workbench/run/confirm.py): the table names each cell's choice under its row
        # (the table's `chosen`); the per-variant search figure below is for the other designs.
        return
    found = confirm_page.points(store, runs, tags)
    if not found:
        return
    page.html(f'<section id="search-and-confirmation"><h2>{confirm_page.TITLE}</h2>')
    page.figure(confirm_page.figure(found, choice, info.order, metric))
    page.html(confirm_page.summary(found, choice, seeds, info.order, metric) + "</section>")


def scaling_section(page: Page, runs: pl.DataFrame, info: table.StudyInfo) -> None:
    """A scaling study's laws: the loss-parameters figure and the fitted parameters (docs/scaling.md)."""
    ladder, fits, crossings = fit_study(table.normalise(runs), info.order, info.extrapolate_to)
    page.html("<section><h2>Scaling laws</h2>")
    if ladder.is_empty():
        page.html("<p>No finished ladder runs yet.</p></section>")
        return
    page.figure(figures.scaling_figure(ladder, fits, info.order))
    page.html(figures.fits_table(fits, crossings) + "</section>")


def effect_sections(page: Page, runs: pl.DataFrame, info: table.StudyInfo) -> None:
    """Effect versus an axis (workbench/analysis/effects.py): a scaling or crossed design's variants against
    the base along its axis; a grid's first axis along each other axis."""
    loss = table.report_metric(runs, "loss")  # the test split's where every run records it
    if info.design_kind in ("scaling", "crossed"):
        found = effects(table.study_table(runs, info, loss), info.axis)
        by_axis = {info.axis[0].split("=")[0] if info.axis else "the axis": found}
    elif info.design_kind == "grid" and info.grid_axes:
        by_axis = {}
        for e in grid_effects(runs, info.grid_axes, loss):
            by_axis.setdefault(e["axis"], []).append(e)
    else:
        return
    for axis, found in by_axis.items():
        if found:
            page.html(f"<section><h2>Effect versus {esc(axis)}</h2>")
            page.figure(figures.effect_figure(found, loss, axis))
            page.html("</section>")


def _best(rows: pl.DataFrame) -> str:
    """The row of lowest mean of the table's metric, with its value."""
    done = rows.filter(pl.col("mean").is_not_null()).sort("mean")
    return f"{done['row'][0]} ({done['mean'][0]:.3f})" if done.height else ""


def curve_sections(page: Page, store: Store, runs: list, frame: pl.DataFrame, order: list[str],
                   sensitivity: bool = True) -> None:
    """Per-position loss, training curves, sensitivity (of the search trials alone; a study with a
    confirmation shows its search in confirm_section instead) and which heads forget, one curve
    per row (a variant at one search point: never averaged across searched values)."""
    positions = results.per_position(store, runs)
    curves = position_curves(store, runs, frame, order, positions)
    if curves:
        page.html("<section><h2>Per-position loss</h2>")
        page.figure(figures.per_position_figure(curves, training_context(runs)))
        page.html("</section>")
    missing = len(runs) - len(positions)
    if missing:
        # Say why a section is absent instead of leaving it out silently.
        page.html(f'<p class="note">{missing} of {len(runs)} finished runs have no per-position loss artifact '
                  f"(an early-stopped trial has none; none at all means the artifacts are not under "
                  f"{esc(str(store.artifact_root or 'the store'))}, e.g. a tracking store copied without its "
                  "mlartifacts folder): the per-position and per-head sections show the others only.</p>")
    training = training_curves(store, runs, frame, order)
    if training:
        page.html("<section><h2>Training curves</h2>")
        page.figure(figures.training_curves_figure(training))
        page.html("</section>")
    # Only gated models log the share (the final value is in the frame): no history fetched otherwise.
    kept = {row: c for row, c in training_curves(store, runs, frame, order, "acp_kept_fraction").items()
            if len(c[0]) > 1} if "acp_kept_fraction" in frame.columns else {}
    if kept:
        page.html(f"<section><h2>{figures.KEPT_HISTORY_TITLE}</h2>")
        page.figure(figures.training_curves_figure(kept, "acp_kept_fraction"))
        page.html(f'<p class="note">{esc(figures.KEPT_HISTORY_NOTE)}</p></section>')
    searched = results.searched_values([r for r in runs if r.data.tags.get("stage") != confirm_page.STAGE])
    if sensitivity and not searched.is_empty() and "val_loss" in frame.columns:
        points = searched.join(frame.filter(pl.col("alias_of").is_null()).select("run_id", "variant", "val_loss"), on="run_id")
        page.html("<section><h2>Hyperparameter sensitivity</h2>")
        page.figure(figures.sensitivity_figure(points))
        page.html("</section>")
    heads, log_eps = forgetting_heads(store, runs, frame, order)
    if heads:
        page.html(f"<section><h2>{figures.HEADS_TITLE}</h2>")
        page.figure(figures.forgetting_heads_figure(heads, log_eps))
        page.html("</section>")


def training_curves(store: Store, runs: list, frame: pl.DataFrame, order: list[str], metric: str = "val_loss") -> dict:
    """row -> (tokens, [seeds, points]) of ``metric``'s history at the tokens every seed has."""
    by_run = frame.filter(pl.col("alias_of").is_null()).select("run_id", "row", "seed")
    hist = results.histories(store, runs, metric).join(by_run, on="run_id")
    training = {}
    for row in order:
        h = hist.filter(pl.col("row") == row)
        if h.is_empty():
            continue
        wide = h.pivot(on="seed", index="tokens", values="value", aggregate_function="mean").sort("tokens").drop_nulls()
        if wide.height:
            training[row] = (wide["tokens"].to_numpy(), wide.drop("tokens").to_numpy().T)
    return training


def fairness_section(page: Page, runs: list, tags: dict) -> None:
    """Beside the table, as `wb results` prints it after its own: per row what was searched, the
    choice and the knobs set away from their defaults unsearched, then the flags
    (foxwb.workbench.analysis.fairness, from the tracked runs alone)."""
    fair = fairness.of_runs(runs, tags)
    if not fair["rows"]:
        return
    short, show = fairness.short, fairness.show
    body = []
    for r in fair["rows"]:
        searched = "; ".join(f"{short(p)}: {', '.join(map(show, v)) if isinstance(v, list) else v}"
                             for p, v in r["searched"].items())
        choice = ", ".join(f"{short(p)}={show(v)}" for p, v in (r["choice"] or {}).items())
        edge = ' <b class="fewer">edge</b>' if r["at_edge"] else ""
        knobs = ", ".join(f"{short(p)}={show(v)}" for p, v in r["knobs"].items())
        body.append(f'<tr><td>{esc(r["row"])}</td><td>{esc(searched)}</td><td class="num">{r["search_trials"] or ""}</td>'
                    f"<td>{esc(choice)}{edge}</td><td>{esc(knobs)}</td></tr>")
    flags = "".join(f"<li>{esc(f['text'])}</li>" for f in fair["flags"])
    # Not table.ablation: readers of the page (and its tests) take that one for the study table.
    page.html('<section id="fairness"><h2>Fairness</h2><table class="fairness" style="font-size:13px"><thead><tr>'
              "<th>row</th><th>searched</th><th>search trials</th><th>choice</th><th>set, not searched</th></tr></thead>"
              "<tbody>" + "".join(body)
              + "</tbody></table>" + (f'<ul class="fewer">{flags}</ul>' if flags else '<p class="note">No flag.</p>')
              + '<p class="note">docs/results.md, "The fairness report".</p></section>')


def cost_section(page: Page, frame: pl.DataFrame, order: list[str]) -> None:
    cost_cols = [c for c in ("n_params", "tokens_per_s", "mfu", "acp_kept_fraction", *figures.MEMORY_KEYS,
                             "gpu_utilization_mean") if c in frame.columns]
    per_variant = frame.group_by("variant", maintain_order=True).agg(pl.col(c).mean() for c in cost_cols)
    rank = {v: i for i, v in enumerate(order)}
    per_variant = per_variant.with_columns(pl.col("variant").replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
                                           .alias("_o")).sort("_o")
    page.html("<section><h2>Parameters, throughput, MFU, memory and GPU use</h2>")
    page.figure(figures.cost_figure(per_variant))
    page.html("</section>")


def forgetting_heads(store: Store, runs: list, frame: pl.DataFrame, order: list[str]):
    """row -> (layers, heads) mean over seeds of the share kept above pruning's threshold, and
    the ln eps it was measured at; ({}, None) when no trial has a forget gate."""
    found = results.kept_per_head(store, runs)
    frame = table.normalise(frame)
    maps, log_eps = {}, None
    for row in order:
        ids = frame.filter(pl.col("row") == row)["run_id"].to_list()
        arrays = [np.array(found[i]["per_head"]) for i in ids if i in found]
        if arrays and len({a.shape for a in arrays}) == 1:
            maps[row] = np.mean(arrays, axis=0)
            log_eps = next(found[i]["acp_log_eps"] for i in ids if i in found)
    return maps, log_eps


def position_curves(store: Store, runs: list, frame: pl.DataFrame, order: list[str],
                    positions: dict | None = None) -> dict[str, np.ndarray]:
    """row -> [seeds, positions] of L(i), from each run's per-position artifact (``positions``:
    results.per_position's answer, when the caller has it already)."""
    positions = results.per_position(store, runs) if positions is None else positions
    frame = table.normalise(frame)
    curves = {}
    for row in order:
        ids = frame.filter(pl.col("row") == row)["run_id"].to_list()
        arrays = [positions[i]["per_position_loss"] for i in ids if i in positions]
        if arrays and len({len(a) for a in arrays}) == 1:
            curves[row] = np.array(arrays)
    return curves


def training_context(runs) -> int | None:
    for r in runs:
        value = r.data.params.get("data.context")
        if value is not None:
            return int(value)
    return None


def index_row(page: str, study: str, info: dict) -> str:
    failed = info.get("failed", 0)
    return (f'<tr><td><a href="{esc(page)}">{esc(study)}</a></td><td>{esc(info.get("date", ""))}</td>'
            f'<td class="num">{info["variants"]}</td><td class="num">{info.get("finished", 0)}</td>'
            f'<td class="num{" failed" if failed else ""}">{failed}</td><td>{esc(info.get("base", ""))}</td>'
            f'<td>{esc(info.get("best", ""))}</td></tr>')


def build_site(store_uri: str, out: Path, artifact_root: Path | None = None, only: str | None = None,
               where: str | None = None) -> dict:
    """Write the site into ``out``; returns {study: page file}. ``where``: the store as errors name
    it (the workdir the user gave; default the URI)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "plotly.min.js").write_text(get_plotlyjs())
    every = results.studies(store_uri)
    found = [(s, e) for s, e in every if only is None or s == only]
    if only is not None and not found:
        raise ValueError(f"--study {only!r}: no such study in {where or store_uri} "
                         f"(the studies there: {', '.join(s for s, _ in every) or 'none'})")
    pages, items = {}, []
    for study, experiment in found:
        store = Store(store_uri, experiment, artifact_root)
        text, info = study_page(store, study)
        name = page_name(study)
        (out / name).write_text(text)
        pages[study] = name
        items.append(index_row(name, study, info))
    index = Page("FoX ablation workbench: studies")
    head = ("<tr><th>Study</th><th>Started</th><th>Variants</th><th>Trials finished</th><th>failed</th>"
            "<th>Base</th><th>Best row (val_ppl)</th></tr>")
    index.html(f'<h1>Studies</h1><table class="ablation studies"><thead>{head}</thead><tbody>{"".join(items)}'
               "</tbody></table>" if items else "<h1>Studies</h1><p>No studies tracked yet.</p>")
    (out / "index.html").write_text(index.render())
    return pages
