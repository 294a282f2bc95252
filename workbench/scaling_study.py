"""A scaling study's laws, from its tracked runs: per variant L(N) fitted by workbench.scaling to
the finished runs of its ladder (N the non-embedding parameter count each run logged, the loss its
final val_loss), the prediction at ``extrapolate_to``, and for each pair of variants where their
laws cross (docs/scaling.md). A ladder whose tokens follow its sizes (``tokens_per_param``) fits
L(N) along that path: there D is a multiple of N, and L(N, D) could not tell the two apart."""
from __future__ import annotations

import polars as pl

from workbench import scaling


def study_fits(runs: pl.DataFrame, order: list[str], extrapolate_to: str | float | None = None,
               n_boot: int = 200) -> dict:
    """``{"fits": {variant: LawFit as JSON}, "crossings": [Crossing as JSON]}`` of the scaling
    study whose runs these are (FINISHED ones, not stopped early), variants in ``order``."""
    _, fits, crossings = fit_study(runs, order, extrapolate_to, n_boot)
    return {"fits": {f.variant: f.to_dict() for f in fits}, "crossings": [c.to_dict() for c in crossings]}


def ladder_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs a law is fitted to: FINISHED, not stopped early, not an alias's copy, with a size and a loss."""
    needed = {"n_params_non_embedding", "val_loss"}
    if runs.is_empty() or not needed <= set(runs.columns):
        return runs.clear() if not runs.is_empty() else runs
    done = runs.filter((pl.col("status") == "FINISHED") & pl.col("val_loss").is_not_null()
                       & pl.col("n_params_non_embedding").is_not_null())
    if "stopped_early" in done.columns:
        done = done.filter(~pl.col("stopped_early").fill_null(False))
    if "alias_of" in done.columns:
        done = done.filter(pl.col("alias_of").is_null())
    return done


def fit_study(runs: pl.DataFrame, order: list[str], extrapolate_to=None, n_boot: int = 200):
    """(the ladder's runs, [LawFit per variant in order], [Crossing per pair])."""
    done = ladder_runs(runs)
    if done.is_empty():
        return done, [], []
    options = scaling.FitOptions(n_boot=n_boot)
    fits = []
    for variant in [v for v in order if v in set(done["variant"])]:
        mine = done.filter(pl.col("variant") == variant)
        fits.append(scaling.fit_law(variant, mine["n_params_non_embedding"].to_numpy(), mine["val_loss"].to_numpy(),
                                    extrapolate_to=extrapolate_to, options=options))
    return done, fits, scaling.compare(fits)
