"""A scaling study's laws, from its tracked runs: per variant L(N) fitted by foxwb.workbench.analysis.scaling.fit to
the finished runs of its ladder (N the non-embedding parameter count each run logged, the loss its
final test_loss, or val_loss where the runs predate the test split), the prediction at ``extrapolate_to``, and for each pair of variants where their
laws cross (docs/scaling.md). A ladder whose tokens follow its sizes (one ``tokens_per_param``) fits
L(N) along that path: there D is a multiple of N, and L(N, D) could not tell the two apart. A
ladder crossed with several budgets fits L(N, D) = E + A/N^alpha + B/D^beta, D the run's tokens."""
from __future__ import annotations

import polars as pl

from foxwb.workbench.analysis import table
from foxwb.workbench.analysis.scaling import fit as scaling

LOSS = "ladder_loss"  # ladder_runs' column: the reported loss (test_loss, else val_loss)


def study_fits(runs: pl.DataFrame, order: list[str], extrapolate_to: str | float | None = None,
               n_boot: int = 200) -> dict:
    """``{"fits": {variant: LawFit as JSON with "crossing"}, "crossings": [Crossing as JSON]}`` of
    the scaling study whose runs these are (FINISHED ones, not stopped early), variants in
    ``order``. A variant's ``crossing`` maps every other variant to their pair's Crossing as JSON
    where the laws cross (its size ``n`` with the interval), else None; ``crossings`` holds every
    pair in order, with the reason where they do not cross."""
    _, fits, crossings = fit_study(runs, order, extrapolate_to, n_boot)
    out = {f.variant: {**f.to_dict(), "crossing": {}} for f in fits}
    for c in crossings:
        a, b = c.variants
        out[a]["crossing"][b] = out[b]["crossing"][a] = None if c.n is None else c.to_dict()
    return {"fits": out, "crossings": [c.to_dict() for c in crossings]}


def ladder_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs a law is fitted to: FINISHED, not stopped early, not an alias's copy, with a size and
    a loss; in one order (variant, size, tokens, seed, loss) whatever order the store returned them
    in, since the bootstrap draws its resamples by position: so a reading's intervals are the next one's."""
    if runs.is_empty() or "n_params_non_embedding" not in runs.columns:
        return runs.clear() if not runs.is_empty() else runs
    # The loss the table reports: the test split's where every finished run records it (docs/trials-and-data.md).
    metric = table.report_metric(runs, "loss")
    if metric not in runs.columns:
        return runs.clear()
    runs = runs.with_columns(pl.col(metric).alias(LOSS))
    done = runs.filter((pl.col("status") == "FINISHED") & pl.col(LOSS).is_not_null()
                       & pl.col("n_params_non_embedding").is_not_null())
    if "stopped_early" in done.columns:
        done = done.filter(~pl.col("stopped_early").fill_null(False))
    if "alias_of" in done.columns:
        done = done.filter(pl.col("alias_of").is_null())
    order = [c for c in ("variant", "n_params_non_embedding", "train_tokens", "seed", LOSS) if c in done.columns]
    return done.sort(order, nulls_last=True)


def fit_study(runs: pl.DataFrame, order: list[str], extrapolate_to=None, n_boot: int = 200):
    """(the ladder's runs, [LawFit per variant in order], [Crossing per pair])."""
    done = ladder_runs(runs)
    if done.is_empty():
        return done, [], []
    options = scaling.FitOptions(n_boot=n_boot)
    # Crossed with token budgets (a size trained on several): L(N, D), predicted and compared at the
    # largest tokens-per-parameter ratio of the ladder.
    crossed = "train_tokens" in done.columns and (done.group_by("variant", "n_params_non_embedding")
                                                  .agg(pl.col("train_tokens").n_unique())["train_tokens"].max() or 0) > 1
    ratio = float((done["train_tokens"] / done["n_params_non_embedding"]).max()) if crossed else None
    at_tokens = None
    if crossed:
        at_tokens = ratio * (scaling.parse_count(extrapolate_to) if extrapolate_to is not None
                             else float(done["n_params_non_embedding"].max()))
    fits = []
    for variant in [v for v in order if v in set(done["variant"])]:
        mine = done.filter(pl.col("variant") == variant)
        n, loss = mine["n_params_non_embedding"].to_numpy(), mine[LOSS].to_numpy()
        if crossed:
            d = mine["train_tokens"].to_numpy()
            fits.append(scaling.fit_law(variant, n, loss, d, extrapolate_to=extrapolate_to,
                                        extrapolate_tokens=at_tokens, options=options))
        else:
            fits.append(scaling.fit_law(variant, n, loss, extrapolate_to=extrapolate_to, options=options))
    return done, fits, scaling.compare(fits, tokens=at_tokens if crossed else None)
