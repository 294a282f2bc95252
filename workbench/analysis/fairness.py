"""The fairness report beside a study table (issue 50; docs/results.md, "The fairness report"): per
row (a variant, or a cell of a crossed or scaling design), what was searched and over which values,
the choice (a tune-then-confirm study's chosen point), whether the choice sits at the edge of what
was searched, the search budget, and every knob set away from its component's default without being
searched for that row. Flags: a knob set to one value on two rows or more and searched on none (a
recipe tuned for one arm, applied to all?), and a choice at the edge of its grid.

- A **knob** (foxwb.workbench.analysis.knobs) is an option of a component (``model.attention.kv_shift.logit_normalizer``), another
  field of the model that is not its size (``init_std``), or a field of ``train`` that shapes the
  optimisation (``lr``, ``warmup_tokens``, ``weight_decay``, ...). Not knobs: a slot's ``kind`` (the
  design's architecture), the model's size (``d_model``, ``n_layers``...), the training budget
  (``tokens``, ``batch_size``, ``grad_accum``), how a trial runs (``device``, ``compile``...), the
  data and the evaluation. A component option that changes the parameter count (the MLP's
  ``hidden_ratio``) is the model's size, shown by the table's parameter counts: it is listed apart
  (``size_knobs``), never flagged.
- Its **default** is the one of the component's options class (foxwb.components.registry), and for
  every other field the one of the spec classes (foxwb.workbench.spec.trial).
- **Searched** for a row: a path of ``search.space`` or of its variant's ``search.variants``, or an axis of a grid design.

Two ways in, one report: ``of_study`` reads the study file's expanded trials (and the choice
recorded on the study's parent run), ``of_runs`` the tracked runs alone (the dashboard, which has no
study file): their flattened specs, tags and the parent run's tags.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from foxwb.workbench.analysis import knobs, table
from foxwb.workbench.spec.study import CrossedDesign, GridDesign, StudySpec, Trial, expand, point_name

TITLE = "fairness"
_SHOWN = 3  # row names a flag lists before "and N more"


@dataclass(frozen=True)
class Unit:
    """One trial as the report reads it."""

    names: tuple[str, ...]  # its variant, then the names that build the very same trial (aliases)
    at: str  # its point on the design's axis ("context=1024", "size=S"); "" for none
    drawn: tuple[tuple[str, Any], ...]  # the searched paths' values
    flat: dict = field(compare=False, hash=False)  # its spec, flattened: dotted path -> value
    confirm: bool = False  # a confirmation trial
    optuna: int = 0  # > 0: the template of an adaptive search of this many draws per seed

    def rows(self) -> list[str]:
        return [_label(n, self.at) for n in self.names]


# ---------------------------------------------------------------- the two ways in

def of_study(study: StudySpec, tags: dict | None = None, runs=None, trials: list[Trial] | None = None) -> dict:
    """The report of a study file: its expanded trials, the search it declares, and the choice:
    a tune-then-confirm study's from the parent run's ``confirm_choice`` tag (``tags``); a random
    or adaptive search without confirmation, each variant's best row (the table's "best point")
    from ``runs`` (the study's runs frame) where given. ``trials``: the study's, expanded (expanded
    here where not given)."""
    trials = expand(study) if trials is None else trials
    space = {p: True for p in study.search.paths()} if study.search else {}
    axes = dict(study.design.axes) if isinstance(study.design, GridDesign) else {}
    units = [_unit_of(t, space) for t in trials]
    search = _search_of(study, tags or {})
    choices = _tagged_choices(tags or {}, space)
    if not choices and study.search is not None and study.search.confirm is None and runs is not None \
            and study.search.algorithm != "grid" and not isinstance(study.design, CrossedDesign):
        choices = _best_points(runs, units, space)
    return report(units, search, choices, axes)


def of_runs(runs: list, tags: dict) -> dict:
    """The report from the tracked runs alone (MLflow runs of the study's trials, ``tags`` of its
    parent run): each run's spec from its params, its searched values from its tags. What was
    searched is what ran; the algorithm and the declared space are not known here."""
    units, seen = [], set()
    order = {v: i for i, v in enumerate(json.loads(tags.get("variants", "[]")))}
    axis = {a: i for i, a in enumerate(json.loads(tags.get("axis", "[]")))}
    for r in sorted(runs, key=lambda r: r.info.start_time):
        t = r.data.tags
        if t.get("spec_hash") in seen or "variant" not in t:
            continue
        seen.add(t.get("spec_hash"))
        flat = {k: knobs.parse(v) for k, v in r.data.params.items()}
        values = json.loads(t.get("search_values", "{}"))
        drawn = tuple((p, v) for p, v in values.items() if p in flat)
        at = _point_label([(p, v) for p, v in values.items() if p not in flat])
        names = (t["variant"], *json.loads(t.get("aliases", "[]")))
        units.append(Unit(names, at, drawn, flat, confirm=t.get("stage") == "confirm"))
    # The design's order, as tagged on the parent run (then the order the runs started in).
    units.sort(key=lambda u: (order.get(u.names[0], len(order)), axis.get(u.at, len(axis))))
    space = {p: None for u in units for p, _ in u.drawn}
    axes = dict(json.loads(tags.get("grid_axes", "[]")))
    confirm = json.loads(tags.get("confirm_seeds", "null"))
    search = {"space": {p: {"tried": "as run"} for p in space}, "algorithm": None, "seeds": None,
              "confirm_seeds": confirm} if space else None
    return report(units, search, _tagged_choices(tags, space), axes)


def _unit_of(t: Trial, space: dict) -> Unit:
    drawn = tuple((p, v) for p, v in t.search_point if p in space)
    at = _point_label([(p, v) for p, v in t.search_point if p not in space])
    return Unit((t.variant, *t.aliases), at, drawn, knobs.flat(t.spec.model_dump(mode="json")), optuna=t.optuna_samples)


def _search_of(study: StudySpec, tags: dict) -> dict | None:
    s = study.search
    if s is None:
        return None
    def described(space: dict) -> dict:
        out = {}
        for path, d in space.items():
            if d.choice is not None:
                out[path] = {"choice": list(d.choice)}
            else:
                kind = "loguniform" if d.loguniform is not None else "uniform"
                out[path] = {kind: list(getattr(d, kind))}
        return out

    return {"space": described(s.space), "variants": {v: described(own) for v, own in s.variants.items()},
            "algorithm": s.algorithm, "num_samples": s.num_samples, "seeds": list(study.seeds),
            "asha": s.asha is not None, "confirm_seeds": _confirm_seeds(study, tags)}


def _confirm_seeds(study: StudySpec, tags: dict) -> list[int] | None:
    """The confirmation's seeds: a plan's those of its last look run (as tagged), else its first look's."""
    confirm = study.search.confirm
    if confirm is None or confirm.seed_plan is None:
        return list(confirm.seeds) if confirm else None
    plan = confirm.seed_plan
    return json.loads(tags["confirm_seeds"]) if "confirm_seeds" in tags else plan.seeds_at(plan.start)


def _tagged_choices(tags: dict, space: dict) -> dict[str, dict]:
    """row (a variant, or a crossed design's cell) -> its chosen values of the searched paths, as
    the confirmation recorded them on the study's parent run (workbench/run/confirm.py)."""
    recorded = json.loads(tags.get("confirm_choice", "{}"))
    return {row: {p: v for p, v in c.get("values", {}).items() if p in space} for row, c in recorded.items()}


def _best_points(runs, units: list[Unit], space: dict) -> dict[str, dict]:
    """A search without confirmation compares each variant's best row (lowest mean val_loss):
    that row's searched values, where the plan (or the row's label) tells them."""
    if runs is None or runs.is_empty() or "val_loss" not in runs.columns:
        return {}
    frame = table.normalise(runs)
    by_label = {(n, _point_label(u.drawn)): dict(u.drawn) for u in units for n in u.names}
    out = {}
    for variant, row in table.best_rows(frame).items():
        point = row[len(variant) + 2:-1] if row.startswith(f"{variant} [") else ""
        values = by_label.get((variant, point))
        if values is None:  # an adaptive draw: its label's values (rounded as the label rounds them)
            values = {}
            for part in point.split(", "):
                name, _, value = part.partition("=")
                path = next((p for p in space if point_name(p) == name), None)
                if path is not None:
                    values[path] = knobs.parse(value)
        out[variant] = values
    return out


# ---------------------------------------------------------------- the report

def report(units: list[Unit], search: dict | None, choices: dict[str, dict], axes: dict[str, list]) -> dict:
    """``{"rows": [...], "flags": [...]}`` (module docstring): one dict per row in the plan's
    order, then the flags (``kind`` "unsearched_knob" or "edge", ``text`` in words)."""
    searched_paths = set((search or {}).get("space", {})) | set(axes)
    by_row: dict[str, list[tuple[str, Unit]]] = {}
    for u in units:
        for name in u.names:
            by_row.setdefault(_label(name, u.at), []).append((name, u))
    rows = []
    for row, mine in by_row.items():
        name, first = mine[0]
        record = {"row": row, "variant": name, "at": first.at}
        record.update(_searched([u for _, u in mine if not u.confirm], search, axes))
        choice = choices.get(_label(first.names[0], first.at))  # an alias has its variant's choice
        if axes:  # a grid design's row is one cell: its values, no choice among them
            choice, record["choice_from"] = {p: knobs.get(first.flat, p) for p in axes}, "grid cell"
        elif choice is not None:
            record["choice_from"] = "confirmation" if search and search.get("confirm_seeds") else "best point"
        else:
            record["choice_from"] = None
        record["choice"] = choice
        record["at_edge"] = _edges(choice, record["searched"]) if record["choice_from"] != "grid cell" else []
        record["knobs"], record["size_knobs"] = _knobs(first, searched_paths)
        record["_trial"] = first.flat
        rows.append(record)
    flags = _recipe_flags(rows) + _edge_flags(rows)
    for r in rows:
        del r["_trial"]
    return {"rows": rows, "flags": flags}


def _searched(tried: list[Unit], search: dict | None, axes: dict) -> dict:
    """What was searched for a row, over which values, and how many search points and trials."""
    if search is None:
        return {"searched": {p: list(v) for p, v in axes.items()}, "search_points": None, "search_trials": None,
                "confirm_trials": None}
    searched: dict[str, list] = {}
    adaptive = sum(u.optuna for u in tried)
    variant = tried[0].names[0] if tried else None
    for path, desc in {**search["space"], **search.get("variants", {}).get(variant, {})}.items():
        drawn = list(dict.fromkeys(v for u in tried for p, v in u.drawn if p == path))
        if "choice" in desc and search.get("algorithm") == "grid":
            searched[path] = list(desc["choice"])
        elif drawn:
            searched[path] = sorted(drawn, key=knobs.order)
        elif desc.get("tried") == "as run":  # read from the runs: this row drew none of it
            continue
        else:  # adaptive draws: the range they come from
            searched[path] = {k: v for k, v in desc.items()}
    points = len({u.drawn for u in tried}) if not adaptive else search.get("num_samples")
    confirm = search.get("confirm_seeds")
    return {"searched": searched, "search_points": points, "search_trials": adaptive or len(tried),
            "confirm_trials": len(confirm) if confirm else None}


def _edges(choice: dict | None, searched: dict) -> list[str]:
    """The searched paths whose chosen value is the smallest or largest of three or more numbers
    tried (as workbench/run/confirm.py's edge_note says of a grid)."""
    out = []
    for path, value in (choice or {}).items():
        tried = searched.get(path)
        numbers = [v for v in tried if knobs.is_number(v)] if isinstance(tried, list) else []
        if len(set(numbers)) >= 3 and knobs.is_number(value) and value in (min(numbers), max(numbers)):
            out.append(path)
    return out


def _knobs(u: Unit, searched: set[str]) -> tuple[dict, dict]:
    """The unit's knobs set away from their defaults and not searched: (recipe knobs, size knobs)."""
    recipe, sizes = {}, {}
    for path, value in u.flat.items():
        if not knobs.is_knob(path) or path in searched:
            continue
        default = knobs.default(path, u.flat)
        if default is knobs.NO_DEFAULT or knobs.same(value, default):
            continue
        (sizes if path.startswith("model.") and knobs.changes_size(u.flat, path, default) else recipe)[path] = value
    return recipe, sizes


def _recipe_flags(rows: list[dict]) -> list[dict]:
    """A knob set to one value on the rows of two distinct trials or more, searched on none of them."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        for path, value in r["knobs"].items():
            groups.setdefault((path, json.dumps(value)), []).append(r)
    flags = []
    for (path, value), mine in groups.items():
        if len({id(r["_trial"]) for r in mine}) < 2:  # a name and its alias are one trial
            continue
        names = [r["row"] for r in mine]
        if len(names) == 2:
            where, none = f"on {names[0]} and {names[1]}", "neither"
        else:
            of = f"all {len(rows)}" if len(names) == len(rows) else f"{len(names)} of {len(rows)}"
            where, none = f"on {of} rows ({_names(names)})", "none"
        text = (f"{short(path)} is set to {show(json.loads(value))} {where}, searched on {none}: a recipe tuned "
                "for one arm applied to all?")
        flags.append({"kind": "unsearched_knob", "path": path, "value": json.loads(value), "rows": names, "text": text})
    return flags


def _edge_flags(rows: list[dict]) -> list[dict]:
    flags = []
    for r in rows:
        for path in r["at_edge"]:
            value, tried = r["choice"][path], r["searched"][path]
            side = "largest" if value == max(v for v in tried if knobs.is_number(v)) else "smallest"
            flags.append({"kind": "edge", "row": r["row"], "path": path, "value": value,
                          "text": f"{r['row']}: {short(path)}={show(value)} is the {side} value searched: the best "
                                  "may lie beyond it"})
    return flags


# ---------------------------------------------------------------- as text

def lines(fair: dict) -> list[str]:
    """The report as ``wb results`` prints it after the table: a header, one line per row, the flags."""
    rows = fair.get("rows", [])
    if not rows:
        return [f"{TITLE}: {fair['note']}"] if fair.get("note") else []
    out = ["", f"{TITLE} (docs/results.md, \"The fairness report\"): per row, what was searched, the choice, and the "
               "knobs set away from their defaults without being searched"]
    searched = [json.dumps(r["searched"], sort_keys=True, default=str) for r in rows]
    shared = len(set(searched)) == 1
    first = rows[0]
    if first["searched"] and shared:
        budget = _budget(first)
        out.append(f"  searched on every row: {_space(first['searched'])}{budget}")
    width = min(max(len(r["row"]) for r in rows), 48)
    for r in rows:
        parts = []
        if r["searched"] and not shared:
            parts.append(f"searched {_space(r['searched'])}{_budget(r)}")
        if r["choice_from"] == "grid cell":
            pass  # the row's name says its cell
        elif r["choice"]:
            edge = " (edge)" if r["at_edge"] else ""
            parts.append(f"chose {', '.join(f'{short(p)}={show(v)}' for p, v in r['choice'].items())}{edge}")
        elif r["searched"] and r.get("search_trials") is not None:
            parts.append("chose: not yet")
        away = ", ".join(f"{short(p)}={show(v)}" for p, v in r["knobs"].items())
        parts.append(f"set, not searched: {away}" if away else "no knob set away from its default")
        out.append(f"  {r['row']:<{width}}  " + "; ".join(parts))
    flags = fair.get("flags", [])
    out += [f"  ! {f['text']}" for f in flags] or ["  no flag"]
    return out


def _budget(r: dict) -> str:
    if r.get("search_trials") is None:
        return ""
    n = r.get("confirm_trials")
    confirm = f"; the choice confirmed on {n} seed{'s' if n != 1 else ''}" if n else ""
    return f" ({r['search_points']} points, {r['search_trials']} search trials a row{confirm})"


def _space(searched: dict) -> str:
    parts = []
    for path, tried in searched.items():
        if isinstance(tried, list):
            parts.append(f"{short(path)} in {{{', '.join(show(v) for v in tried)}}}")
        else:
            parts.append(f"{short(path)} " + ", ".join(f"{k} {v}" for k, v in tried.items()))
    return "; ".join(parts)


# ---------------------------------------------------------------- labels

def show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 100_000:
        return f"{v:.3g}".replace("e+0", "e").replace("e+", "e")
    return str(v)


def short(path: str) -> str:
    """``kv_shift.logit_normalizer``, ``mlp.hidden_ratio``, ``warmup_tokens``: the path without the
    sections every reader knows."""
    for prefix in ("model.attention.", "model.", "train."):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _point_label(items) -> str:
    return Trial("", 0, None, tuple(items)).point_label


def _label(name: str, at: str) -> str:
    return f"{name} [{at}]" if at else name
