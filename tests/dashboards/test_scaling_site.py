"""A tiny scaling study end to end on real Ray and MLflow: the ladder runs, `wb results` fits a law
per variant and says where they cross (checked against the fitting library on the store's values,
read by hand), and the dashboard draws the laws, opened in headless Chromium."""
import json
import shutil
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.dashboards.test_site import browser  # noqa: F401  (the module's headless Chromium fixture)
from foxwb.workbench.analysis.scaling import fit as scaling
from tests.cli import script, wb

ROOT = Path(__file__).resolve().parents[2]
SIZES = [16, 24, 32, 48, 64]
STUDY = {
    "name": "ladder",
    "base": {"model": {"preset": "fox_pro", "vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2,
                       "mlp": {"kind": "swiglu", "intermediate_size": 64}},
             "data": {"kind": "builtin", "context": 64, "max_bytes": 600000},
             "train": {"tokens": 16384, "batch_size": 8, "eval_batches": 1, "cpu_threads": 1},
             "eval": {"sequences": 4, "length_multiples": [1], "test_tokens": 4096, "min_test_tokens": 1024}},
    "design": {"kind": "scaling",
               "sizes": [{"name": f"d{d}", "set": {"model.d_model": d, "model.mlp.intermediate_size": 2 * d}} for d in SIZES],
               "variants": [{"name": "FoX (Pro)", "set": {"model.attention.forget_gate": "data_dependent"}},
                            {"name": "no gate", "set": {"model.attention.forget_gate": "none"}}],
               "extrapolate_to": "1M"},
    "seeds": [0],
}




@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ladder")
    study = folder / "ladder.yaml"
    study.write_text(yaml.safe_dump(STUDY))
    proc = wb("run", study, "--workdir", folder / "w")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return study, folder / "w"


def by_hand(workdir):
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ladder")
    out = {}
    for r in client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'"):
        out.setdefault(r.data.tags["variant"], []).append((r.data.metrics["n_params_non_embedding"], r.data.metrics["test_loss"]))
    return out


def test_wb_results_fits_a_law_per_variant_and_their_crossing(ladder):
    study, workdir = ladder
    proc = wb("results", study, "--workdir", workdir, "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    runs = by_hand(workdir)
    assert set(got["fits"]) == set(runs) == {"FoX (Pro)", "no gate"}
    fits = {}
    for variant, points in runs.items():
        n, loss = zip(*points)
        fits[variant] = scaling.fit_law(variant, n, loss, extrapolate_to="1M")
        want, have = fits[variant].to_dict(), got["fits"][variant]
        assert have["n_points"] == len(SIZES) and have["status"] == want["status"]
        for key in ("E", "A", "alpha", "prediction"):
            assert have[key] == pytest.approx(want[key]), key
    (cross,) = got["crossings"]
    want = scaling.crossing(fits["FoX (Pro)"], fits["no gate"]).to_dict()
    assert cross["variants"] == want["variants"] and cross["reason"] == want["reason"]
    assert (cross["n"] is None) == (want["n"] is None)
    if want["n"] is not None:
        assert cross["n"] == pytest.approx(want["n"]) and cross["share_crossing"] == pytest.approx(want["share_crossing"])
    # Under fits, each variant's crossing with the other: the pair's crossing, or null where there is none.
    pair = got["fits"]["FoX (Pro)"]["crossing"]["no gate"]
    assert pair == got["fits"]["no gate"]["crossing"]["FoX (Pro)"] == (None if want["n"] is None else cross)
    assert got["rows"][0]["search_point"] == "size=d16"
    text = wb("results", study, "--workdir", workdir)
    assert "laws L(N) = E + A / N^alpha" in text.stdout and "FoX (Pro) vs no gate:" in text.stdout


def test_the_dashboard_draws_the_laws_in_chromium(ladder, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _, workdir = ladder
    proc = wb("dashboard", "--workdir", workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = next((workdir / "dashboard").glob("study-ladder*.html"))
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('.wb-figure')).every(f => f.querySelector('svg.main-svg'))"))
    assert browser.execute_script("return window.__wb_errors") == []
    # The first figure after the table is the laws': per variant its runs, a band, the law and the star.
    names = browser.execute_script(
        "var h = Array.from(document.querySelectorAll('h2')).find(e => e.textContent == 'Scaling laws');"
        "var f = h.parentElement.querySelector('.wb-figure'); return f.data.map(t => t.name || '');")
    for variant in ("FoX (Pro)", "no gate"):
        assert f"{variant} (runs)" in names and any(n.startswith(f"{variant}: L = ") for n in names)
        assert f"{variant} at 1e+06" in names
    effect = browser.execute_script(
        "var h = Array.from(document.querySelectorAll('h2')).find(e => e.textContent == 'Effect versus size');"
        "var f = h.parentElement.querySelector('.wb-figure'); return [f.data.length, f.data[0].x];")
    assert effect == [1, [f"size=d{d}" for d in SIZES]]
    cells = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "table.fits td")]
    fit = json.loads(wb("results", ladder[0], "--workdir", workdir, "--format", "json").stdout)["fits"]["FoX (Pro)"]
    assert f"{fit['E']['value']:.4g}" in cells[1] and f"{fit['alpha']['value']:.4g}" in cells[3]


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")),
                    reason="needs Chrome or Chromium for kaleido")
def test_study_figure_writes_the_laws_and_the_effect_as_pngs(ladder, tmp_path):
    """scripts/study_figure.py, the docs' figures: the ladder's laws and its effect versus size
    render as PNGs from the store; a study without an axis is refused with a sentence."""
    _, workdir = ladder
    browser = shutil.which("chromium") or shutil.which("google-chrome") or shutil.which("chromium-browser")
    env = {"BROWSER_PATH": browser}
    for figure in ("laws", "effect"):
        out = tmp_path / f"{figure}.png"
        run = script("study_figure.py", "--workdir", workdir, "--study", "ladder", "--figure", figure, "--out", out, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    # A chosen pair (the base's difference from the other variant, the reverse of the default).
    out = tmp_path / "pair.png"
    run = script("study_figure.py", "--workdir", workdir, "--study", "ladder", "--figure", "effect",
                 "--pair", "FoX (Pro)=no gate", "--out", out, env=env)
    assert run.returncode == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", run.stderr[-2000:]
    # Bad input: one usage line naming what is wrong and what is allowed, exit 2 as the CLI's.
    for argv, says in ((["--study", "nope", "--figure", "laws"], "nope"),
                       (["--study", "ladder", "--figure", "effect", "--pair", "FoX (Pro)=gateless"], "'no gate'"),
                       (["--study", "ladder", "--figure", "effect", "--pair", "FoX (Pro)"], "VARIANT=BASE"),
                       (["--study", "ladder", "--figure", "effect", "--metric", "val_lost"], "val_lost")):
        run = script("study_figure.py", "--workdir", workdir, *argv, "--out", tmp_path / "x.png", env=env)
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr, (argv, run.stderr[-2000:])
