"""The dashboard site: a static, self-contained folder (index.html, one page per study, one copy of
plotly.js) built from the tracking store; it works offline and from file://."""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import numpy as np
import plotly.io as pio
import polars as pl
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from foxwb.dashboards import claims_table, confirm_page, figures, render
from foxwb.workbench.analysis import runs as results
from foxwb.workbench.analysis import fairness, knobs, status, table
from foxwb.workbench.analysis.claims import declared, study_claims
from foxwb.workbench.analysis.effects import effects, grid_effects
from foxwb.workbench.analysis.scaling.laws import fit_study
from foxwb.workbench.downstream.study import store_comparisons
from foxwb.workbench.run.tracking import Store
from foxwb.workbench.spec.seed_plan import SeedPlan


def page_name(study: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", study).strip("-")[:40] or "study"
    return f"study-{slug}-{hashlib.sha1(study.encode()).hexdigest()[:8]}.html"


def _script_json(fig) -> Markup:
    # Inside <script>, "</" could close the tag: a name like "</script>" must stay data.
    return Markup(pio.to_json(fig, validate=False).replace("</", "<\\/").replace("<!--", "<\\!--"))


class Page:
    """A page's figures, each once: its div's id and its JSON, drawn by templates/page.html.j2; and
    each by its name (``named``: name -> plotly figure), the same on every build of the page, which
    `wb dashboard` logs to the study's MLflow run."""

    def __init__(self):
        self.figures: list[dict] = []
        self.named: dict = {}

    @property
    def n(self) -> int:
        return len(self.figures)

    def figure(self, fig, name: str) -> dict:
        ref = {"id": f"fig-{self.n + 1}", "json": _script_json(fig)}
        self.figures.append(ref)
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "figure"
        self.named[slug if slug not in self.named else f"{slug}-{self.n}"] = fig
        return ref


def study_page(store: Store, study: str) -> tuple[str, dict]:
    attempts = results.all_runs(store, study)
    runs = [r for r in attempts if r.info.status == "FINISHED"]
    parent = results.study_parent(store, study)
    tags = parent.data.tags if parent else {}
    page = Page()
    ctx = {"title": f"{study} · FoX ablation workbench", "study": study, "description": tags.get("mlflow.note.content", "")}
    everything = results.trial_runs(Path("."), study, runs=attempts)
    everything = results.with_test_documents(store, everything, attempts)  # the claims' seed x document interval
    if everything.is_empty():
        return render("study.html.j2", **ctx, empty=True, figures=[]), {"variants": 0, "runs": 0}
    # One definition of the base, the order and the rows, as `wb results` (foxwb.workbench.analysis.table).
    info = table.study_info(study, everything, parent_tags=tags)
    metric = table.report_metric(everything)  # the test split's, as `wb results` (docs/trials-and-data.md, "Three splits")
    rows = table.study_table(everything, info, metric)
    # One colour per variant on the whole page, in the design's order (a search's rows: shades of it).
    colours = figures.Colours(info.order, dict(zip(rows["row"].to_list(), rows["variant"].to_list())))
    # The claims' verdicts first, as `wb results` prints them (the declared claims, as tagged, else the default ones).
    plan = SeedPlan.model_validate_json(tags["seed_plan"]) if tags.get("seed_plan") else None
    verdicts = study_claims(everything, info, declared(tags=tags), plan=plan)
    ctx.update(empty=False, claims=claims_table.html(verdicts, info.alpha),
               split={"note": table.split_note(everything, metric), "small": table.small_test_sets(everything)},
               table=figures.ablation_table(rows, info, metric, options=component_options(attempts)))
    space = searched_space(tags)
    # Tune, then confirm: each variant's search beside the table; then what each row searched and set.
    ctx["confirm"] = confirm_section(page, store, attempts, tags, info, colours, space) if info.choice else None
    ctx["fairness"] = fairness_section(attempts, tags)
    ctx["downstream"] = downstream_section(store, attempts, info.base)
    ctx["seeds"] = seeds_section(page, everything, rows, info, metric, colours)
    ctx["scaling"] = scaling_section(page, everything, info, colours) if info.design_kind == "scaling" else None
    ctx["effects"] = effect_sections(page, everything, info, colours)
    # Each trial once: a confirmation row and its chosen search point, or an alias, share trials.
    final = list(status.final_statuses(attempts).values())
    summary = {"variants": rows["variant"].n_unique(), "runs": len(runs), "base": info.base,
               "finished": final.count("FINISHED"), "failed": final.count("FAILED") + final.count("KILLED"),
               "date": time.strftime("%Y-%m-%d", time.gmtime(parent.info.start_time / 1000)) if parent else "",
               "best": _best(rows)}
    frame = table.normalise(everything.filter(pl.col("status") == "FINISHED"))
    ctx["finished"] = not frame.is_empty()
    if ctx["finished"]:
        order = rows.filter(pl.col("n_seeds") > 0)["row"].to_list()
        ctx["curves"] = curve_sections(page, store, runs, frame, order, colours,
                                       sensitivity=not info.choice, space=space, variants=info.order)
        ctx["cost"] = cost_section(page, frame, info.order, colours)
        ctx["footer"] = {"rows": frame.height, "runs": len(runs), "attempts": len(attempts)}
    return render("study.html.j2", **ctx, figures=page.figures), {**summary, "figures": page.n, "named": page.named}


def component_options(runs: list) -> dict[str, dict[str, dict]]:
    """variant -> attention slot -> {"all": its kind's options as the variant's runs were given them
    (the tracked params ``model.attention.<slot>.<option>``; one that differs between its runs, a
    searched one, is the row's search point and left out), "shown": those the table names beside
    the kind}: every option of a plug-in's kind (tag ``plugins``) or of a kind not registered here,
    of a built-in kind those set away from its default."""
    seen: dict[str, dict[str, set]] = {}
    plugged: dict[str, set] = {}
    for r in runs:
        for name in [r.data.tags.get("variant"), *json.loads(r.data.tags.get("aliases", "[]"))]:
            mine = seen.setdefault(name, {})
            for key, value in r.data.params.items():
                where = knobs.slot(key)
                if where and where[1] in figures.SLOT_NAMES and key.startswith("model.attention."):
                    mine.setdefault(key, set()).add(value)
            for dist in json.loads(r.data.tags.get("plugins", "{}")).values():
                plugged.setdefault(name, set()).update(dist.get("kinds", []))
    out: dict[str, dict[str, dict]] = {}
    for name, params in seen.items():
        kinds = {knobs.slot(k)[1]: next(iter(v)) for k, v in params.items() if knobs.slot(k)[2] == "kind" and len(v) == 1}
        for key, values in sorted(params.items()):
            _, slot, option = knobs.slot(key)
            if option == "kind" or len(values) != 1 or slot not in kinds:
                continue
            value, kind = knobs.parse(next(iter(values))), kinds[slot]
            defaults = knobs.option_defaults(slot, kind)
            entry = out.setdefault(name, {}).setdefault(slot, {"all": {}, "shown": {}})
            entry["all"][option] = fairness.show(value)
            if f"{slot}={kind}" in plugged.get(name, ()) or not defaults or option not in defaults \
                    or not knobs.same(value, defaults[option]):
                entry["shown"][option] = fairness.show(value)
    return out


def searched_space(tags: dict) -> dict[str, str]:
    """path -> how it was searched (``loguniform``, ``uniform``, ``choice``), as the study's parent
    run records it (tag ``search_space``; a store without it: {}, and the figures read the values)."""
    try:
        space = json.loads(tags.get("search_space", "{}"))
    except ValueError:
        return {}
    return {p: (d if isinstance(d, str) else next(iter(d), "")) for p, d in space.items()} if isinstance(space, dict) else {}


def seeds_section(page: Page, runs: pl.DataFrame, rows: pl.DataFrame, info: table.StudyInfo, metric: str,
                  colours: figures.Colours) -> dict | None:
    """Each row's seeds as dots around its mean: where one seed runs far from the rest, and which rows
    need many seeds for a small effect. The rows with two seeds or more (a search point on one seed
    has no spread)."""
    spread = rows.filter(pl.col("n_seeds") > 1)["row"].to_list() if not rows.is_empty() else []
    if not spread:
        return None
    fig = figures.seeds_figure(table.row_seed_values(runs, info, metric), spread, metric, colours)
    return {"figure": page.figure(fig, "seeds"), "metric": metric}


def confirm_section(page: Page, store: Store, runs: list, tags: dict, info: table.StudyInfo,
                    colours: figures.Colours, space: dict[str, str]) -> dict | None:
    """Tune, then confirm: per variant its search, the chosen point and the confirmation runs
    (dashboards/confirm_page.py)."""
    choice, seeds, metric = confirm_page.choice_of(tags)
    if info.design_kind == "crossed":
        # Chosen per cell (workbench/run/confirm.py): the table names each cell's choice under its row
        # (the table's `chosen`); the per-variant search figure below is for the other designs.
        return None
    found = confirm_page.points(store, runs, tags)
    if not found:
        return None
    log = {path for path in {p["path"] for p in found}
           if figures.log_scaled([p["value"] for p in found if p["path"] == path], space.get(path))}
    fig = confirm_page.figure(found, choice, info.order, metric, colours, log)
    return {"title": confirm_page.TITLE, "caption": confirm_page.CAPTION.format(metric=metric), "figure": page.figure(fig, "search"),
            "summary": confirm_page.summary(found, choice, seeds, info.order, metric)}


def scaling_section(page: Page, runs: pl.DataFrame, info: table.StudyInfo, colours: figures.Colours) -> dict:
    """A scaling study's laws: the loss-parameters figure and the fitted parameters (docs/scaling.md)."""
    ladder, fits, crossings = fit_study(table.normalise(runs), info.order, info.extrapolate_to)
    if ladder.is_empty():
        return {"figure": None}
    return {"figure": page.figure(figures.scaling_figure(ladder, fits, info.order, colours), "scaling"),
            "fits": figures.fits_table(fits, crossings)}


def effect_sections(page: Page, runs: pl.DataFrame, info: table.StudyInfo, colours: figures.Colours) -> list[dict]:
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
        return []
    return [{"axis": axis, "figure": page.figure(figures.effect_figure(found, loss, axis, colours), f"effect-{axis}")}
            for axis, found in by_axis.items() if found]


def _best(rows: pl.DataFrame) -> str:
    """The row of lowest mean of the table's metric, with its value."""
    done = rows.filter(pl.col("mean").is_not_null()).sort("mean")
    return f"{done['row'][0]} ({done['mean'][0]:.3f})" if done.height else ""


def curve_sections(page: Page, store: Store, runs: list, frame: pl.DataFrame, order: list[str],
                   colours: figures.Colours, sensitivity: bool = True, space: dict[str, str] | None = None,
                   variants: list[str] | None = None) -> dict:
    """Per-position loss, training curves, sensitivity (of the search trials alone; a study with a
    confirmation shows its search in confirm_section instead) and which heads forget, one curve
    per row (a variant at one search point: never averaged across searched values)."""
    out: dict = dict.fromkeys(("positions", "missing", "training", "kept", "sensitivity", "heads"))
    positions = results.per_position(store, runs)
    curves = position_curves(store, runs, frame, order, positions)
    if curves:
        out["positions"] = page.figure(figures.per_position_figure(curves, training_context(runs), colours), "per-position-loss")
    missing = len(runs) - len(positions)
    if missing:
        out["missing"] = {"n": missing, "of": len(runs), "root": str(store.artifact_root or "the store")}
    training = training_curves(store, runs, frame, order)
    if training:
        out["training"] = page.figure(figures.training_curves_figure(training, colours=colours), "training-curves")
    # Only gated models log the share (the final value is in the frame): no history fetched otherwise.
    kept = {row: c for row, c in training_curves(store, runs, frame, order, "acp_kept_fraction").items()
            if len(c[0]) > 1} if "acp_kept_fraction" in frame.columns else {}
    if kept:
        out["kept"] = {"title": figures.KEPT_HISTORY_TITLE, "note": figures.KEPT_HISTORY_NOTE,
                       "figure": page.figure(figures.training_curves_figure(kept, "acp_kept_fraction", colours), "kept-share")}
    points = sensitivity_points(runs) if sensitivity else None
    if points is not None and not points.is_empty():
        log = {path for path in points["param"].unique().to_list()
               if figures.log_scaled(points.filter(pl.col("param") == path)["value"].to_list(), (space or {}).get(path))}
        fig = figures.sensitivity_figure(points, "val_loss", colours, log, variants)
        out["sensitivity"] = {"figure": page.figure(fig, "sensitivity"), "note": figures.SENSITIVITY_NOTE.format(metric="val_loss")}
    heads, log_eps = forgetting_heads(store, runs, frame, order)
    if heads:
        out["heads"] = {"title": figures.HEADS_TITLE, "note": figures.HEADS_NOTE.format(log_eps=log_eps),
                        "figure": page.figure(figures.forgetting_heads_figure(heads, log_eps), "forgetting-heads")}
    return out


def sensitivity_points(runs: list, metric: str = "val_loss") -> pl.DataFrame:
    """One row per finished search trial (not a confirmation run, not one ASHA stopped early: its
    last validation is no final value) and searched field: variant, seed, param (the field's path),
    value, rest (the trial's values of the other searched fields) and ``metric``, from the runs'
    tags (``search_values``: those that are fields of the trial's spec, its params)."""
    rows = []
    for r in runs:
        t = r.data.tags
        if t.get("stage") == confirm_page.STAGE or t.get("stopped_early") == "true" or metric not in r.data.metrics:
            continue
        # The searched fields are paths of the spec; a scaling or crossed design's point ("size") is not one.
        values = {p: v for p, v in json.loads(t.get("search_values") or "{}").items() if p in r.data.params}
        for path, value in values.items():
            rest = ", ".join(f"{fairness.short(p)}={fairness.show(v)}" for p, v in values.items() if p != path)
            rows.append({"variant": t["variant"], "seed": int(t["seed"]), "param": path, "value": value, "rest": rest,
                         metric: r.data.metrics[metric]})
    if not rows:
        return pl.DataFrame()
    # Values that are not all numbers (a choice of kinds) are drawn as categories, by their names.
    if not all(isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool) for r in rows):
        rows = [{**r, "value": fairness.show(r["value"])} for r in rows]
    else:
        rows = [{**r, "value": float(r["value"])} for r in rows]
    return pl.DataFrame(rows)


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


def downstream_section(store: Store, runs: list, base: str) -> list[dict]:
    """Each variant against the base on the tasks `wb eval` ran, from the per-item files logged to
    the trials' runs, as `wb results` shows them (workbench/downstream/paired.py)."""
    return [{"task": task, "a": c["a"], "b": c["b"], "acc_a": f"{c['acc_a']:.3f}", "acc_b": f"{c['acc_b']:.3f}",
             "delta": f"{c['delta']:+.3f}", "ci": f"[{c['delta_ci'][0]:+.3f}, {c['delta_ci'][1]:+.3f}]",
             "p": f"{c['p']:.3g}", "pairs": c["items"], "differ": c["a_only"] + c["b_only"],
             "seeds": ", ".join(map(str, c["seeds"]))}
            for task, compared in store_comparisons(store, runs, base).items() for c in compared]


def fairness_section(runs: list, tags: dict) -> dict | None:
    """Beside the table, as `wb results` prints it after its own: per row what was searched, the
    choice and the knobs set away from their defaults unsearched, then the flags
    (foxwb.workbench.analysis.fairness, from the tracked runs alone)."""
    fair = fairness.of_runs(runs, tags)
    if not fair["rows"]:
        return None
    short, show = fairness.short, fairness.show
    rows = [{"row": r["row"],
             "searched": "; ".join(f"{short(p)}: {', '.join(map(show, v)) if isinstance(v, list) else v}"
                                   for p, v in r["searched"].items()),
             "trials": r["search_trials"] or "",
             "choice": ", ".join(f"{short(p)}={show(v)}" for p, v in (r["choice"] or {}).items()),
             "edge": r["at_edge"], "knobs": ", ".join(f"{short(p)}={show(v)}" for p, v in r["knobs"].items())}
            for r in fair["rows"]]
    return {"rows": rows, "flags": [f["text"] for f in fair["flags"]]}


def cost_section(page: Page, frame: pl.DataFrame, order: list[str], colours: figures.Colours) -> dict:
    """Parameters, throughput and the rest, a panel per measure with data, and a sentence for each
    one left out (figures.cost_panels)."""
    cost_cols = [c for c in ("n_params", "tokens_per_s", "mfu", "acp_kept_fraction", *figures.MEMORY_KEYS,
                             "gpu_utilization_mean") if c in frame.columns]
    per_variant = frame.group_by("variant", maintain_order=True).agg(pl.col(c).mean() for c in cost_cols)
    rank = {v: i for i, v in enumerate(order)}
    per_variant = per_variant.with_columns(pl.col("variant").replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
                                           .alias("_o")).sort("_o")
    panels, absent = figures.cost_panels(per_variant)
    names = [t.split(" (")[0] for _, t in panels if t != figures.KEPT_TITLE] or ["cost"]
    title = (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]).capitalize()
    fig = page.figure(figures.cost_figure(per_variant, colours), "cost") if panels else None
    return {"title": title, "figure": fig, "absent": absent}


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


def build_site(store_uri: str, out: Path, artifact_root: Path | None = None, only: str | None = None,
               where: str | None = None, figures_to=None) -> dict:
    """Write the site into ``out``; returns {study: page file}. ``where``: the store as errors name
    it (the workdir the user gave; default the URI). ``figures_to(store, study, figures)``, where
    given, is handed each study page's figures by name (Page.named) once its page is written."""
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
        if figures_to is not None and info.get("named"):
            figures_to(store, study, info["named"])
        items.append({"page": name, "study": study, "date": info.get("date", ""), "variants": info["variants"],
                      "finished": info.get("finished", 0), "failed": info.get("failed", 0),
                      "base": info.get("base", ""), "best": info.get("best", "")})
    (out / "index.html").write_text(render("index.html.j2", title="FoX ablation workbench: studies", studies=items,
                                           figures=[]))
    return pages
