"""The dashboard site, built from real tracked runs and opened in a real headless Chromium."""
import html
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.cli import wb

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--window-size=1300,2400"]




PLUGIN = """
from typing import Literal
import torch
import torch.nn as nn
import torch.nn.functional as F
from foxwb.components.registry import ComponentSpec

class L2QKNormSpec(ComponentSpec):
    slot = "qk_norm"
    kind: Literal["l2norm"] = "l2norm"
    init_scale: float = 1.0

    def build(self, dims):
        return L2QKNorm(dims.head_dim, self.init_scale)

class L2QKNorm(nn.Module):
    def __init__(self, head_dim, init_scale=1.0):
        super().__init__()
        self.scale = nn.Parameter(torch.full((1,), init_scale * float(head_dim) ** 0.5))

    def forward(self, q, k):
        # q, k: (B, T, H, D); unit length over D, one learned scale.
        return F.normalize(q, dim=-1) * self.scale, F.normalize(k, dim=-1) * self.scale
"""


def plugin_path(folder: Path) -> Path:
    """A third-party QK-norm kind `l2norm`, installed as pip would (a .dist-info with its entry
    point) in ``folder``, for PYTHONPATH."""
    (folder / "wb_l2norm.py").write_text(PLUGIN)
    dist = folder / "wb_l2norm-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: wb-l2norm\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.components]\nl2norm = wb_l2norm:L2QKNormSpec\n")
    return folder


@pytest.fixture(scope="module")
def site(quickstart, tmp_path_factory):
    shared, proc, _ = quickstart
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The quickstart store is shared by the whole test run (and by every xdist worker, each of which
    # may build this module's fixture): the studies below go into a copy of it, never into it.
    workdir = tmp_path_factory.mktemp("site") / "w"
    shutil.copytree(shared, workdir, ignore=shutil.ignore_patterns("site"))
    # A study whose rows failed, with a plug-in kind and a built-in one that are not the paper's.
    plugin = plugin_path(tmp_path_factory.mktemp("plugin"))
    base = yaml.safe_load((ROOT / "studies/quickstart.yaml").read_text())["base"]
    base["train"].update(tokens=20000, eval_every_tokens=10000)
    mix = {"name": "mix", "base": base, "seeds": [0, 1],
           "design": {"kind": "ablation", "base_name": "FoX (Pro)", "changes": [
               {"name": "raises", "set": {"data": {"kind": "text", "paths": [str(plugin / "missing.txt")], "context": 128}}},
               {"name": "L2 QK-norm", "set": {"model.attention.qk_norm": {"kind": "l2norm", "init_scale": 0.5}}},
               {"name": "bias-only gate", "set": {"model.attention.forget_gate": "bias_only"}}]}}
    (plugin / "mix.yaml").write_text(yaml.safe_dump(mix))
    env = {**__import__("os").environ, "PYTHONPATH": str(plugin)}
    ran = wb("run", plugin / "mix.yaml", "--workdir", workdir, env=env)
    assert ran.returncode == 1 and "2 trials failed: raises / seed 0; raises / seed 1" in ran.stdout, ran.stderr[-3000:]
    # A second study whose name and variant names are markup: they must show as text.
    evil = tmp_path_factory.mktemp("evil")
    base = yaml.safe_load((ROOT / "studies/quickstart.yaml").read_text())["base"]
    base["train"].update(tokens=20000, eval_every_tokens=10000)
    study = {"name": "<script>alert(1)</script>", "description": "<img src=x onerror=alert(2)>", "base": base,
             "design": {"kind": "ablation", "base_name": "<b>base</b>",
                        "changes": [{"name": "</script><script>alert(3)</script>", "set": {"model.attention.qk_norm": "none"}}]}}
    (evil / "evil.yaml").write_text(yaml.safe_dump(study))
    assert wb("run", evil / "evil.yaml", "--workdir", workdir).returncode == 0
    out = workdir / "site"
    built = wb("dashboard", "--workdir", workdir, "--out", out)
    assert built.returncode == 0, built.stderr[-2000:]
    return workdir, out


def figures_of(page: str) -> list[dict]:
    """The plotly JSON of every figure of a page, as its script hands it to Plotly."""
    return [json.loads(m) for m in re.findall(r"var f=(\{.*?\});Plotly", page)]


def panel_titles(page: str) -> list[str]:
    """Every subplot title of a page's figures, on one line (the figures wrap them)."""
    return [a["text"].replace("<br>", " ") for f in figures_of(page) for a in f["layout"].get("annotations", [])]


def colours_by_name(figs: list[dict]) -> dict[str, set[str]]:
    """name -> the colours its traces are drawn in, over every figure: the traces drawn in a
    variant's (or row's) colour name it in meta.colour_of (dashboards/figures.py)."""
    out: dict[str, set[str]] = {}
    for f in figs:
        for t in f["data"]:
            name = (t.get("meta") or {}).get("colour_of")
            if name is not None:
                colour = (t.get("line") or {}).get("color") or (t.get("marker") or {}).get("color")
                assert isinstance(colour, str), t
                out.setdefault(name, set()).add(colour)
                assert t.get("legendgroup") in (name, (t.get("meta") or {}).get("kind")), t  # the legend groups by it too
    return out


def test_the_site_is_self_contained(site):
    _, out = site
    pages = sorted(out.glob("*.html"))
    assert len(pages) == 4 and (out / "plotly.min.js").stat().st_size > 1_000_000
    for page in pages:
        text = page.read_text()
        # Nothing is loaded from elsewhere: the only script file is the site's own plotly.js.
        assert re.findall(r'<script src="([^"]*)"', text) == ["plotly.min.js"]
        assert not re.findall(r'(?:src|href)="(?:https?:)?//', text)


def test_every_variant_is_shown_with_the_store_numbers(site):
    workdir, out = site
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("quickstart")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    by_variant = {}
    for r in runs:
        by_variant.setdefault(r.data.tags["variant"], []).append(r.data.metrics["test_ppl"])
    assert len(by_variant) == 3
    assert "&Delta; vs FoX (Pro)</th>" in page  # the study's base, from its parent run's tag
    for variant, values in by_variant.items():
        row = re.search(rf'<td class="variant">{re.escape(html.escape(variant))}</td>(.*?)</tr>', page).group(1)
        assert f"{sum(values) / len(values):.3f} &plusmn;" in row, (variant, row)
    # The paired comparison, recomputed from the store: per seed, the variant minus the base.
    seeds = {(r.data.tags["variant"], r.data.tags["seed"]): r.data.metrics["test_ppl"] for r in runs}
    for variant in by_variant:
        if variant == "FoX (Pro)":
            continue
        diffs = [v - seeds[("FoX (Pro)", s)] for (name, s), v in seeds.items() if name == variant]
        row = re.search(rf'<td class="variant">{re.escape(html.escape(variant))}</td>(.*?)</tr>', page).group(1)
        assert f"paired {sum(diffs) / len(diffs):+.3f} &plusmn;" in row, (variant, row)


def test_the_study_page_shows_the_claims_verdicts_before_the_table(site):
    _, out = site
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    start = page.index('<section id="claims">')
    assert start < page.index("<h2>Ablation table</h2>")
    section = page[start:page.index("</section>", start)]
    for variant in ("FoX (Pro) - forget gate", "FoX (Pro) - KV-shift"):  # the default claims: each row against the base
        row = re.search(rf'<td class="claim">{re.escape(html.escape(variant))}</td>(.*?)</tr>', section).group(1)
        assert re.search(r">(better|worse|equivalent|inconclusive)</td>", row), row
    assert "declares no claims" in section and "SESOI of 1%" in section and "On test_loss" in section


def test_deltas_are_taken_against_the_studys_tagged_base(quickstart, tmp_path):
    """The dashboard reads the base row from the study's parent run (the runner tags the design's
    base or a variants design's compare_to there): retagged, the table compares against it."""
    workdir = tmp_path / "copy"
    shutil.copytree(quickstart[0], workdir, ignore=shutil.ignore_patterns("site", "trials"))
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("quickstart")
    parent = client.search_runs([exp.experiment_id], "tags.wb_kind = 'study'")[0]
    client.set_tag(parent.info.run_id, "base_variant", "FoX (Pro) - forget gate")
    # --study takes the study's file as `wb results` does, or its name.
    built = wb("dashboard", "--workdir", workdir, "--study", ROOT / "studies/quickstart.yaml", "--out", tmp_path / "site")
    assert built.returncode == 0 and "(1 study)" in built.stdout, built.stderr[-2000:]
    page = next((tmp_path / "site").glob("study-quickstart-*.html")).read_text()
    assert "&Delta; vs FoX (Pro) - forget gate</th>" in page
    unknown = wb("dashboard", "--workdir", workdir, "--study", "quickstrat", "--out", tmp_path / "site")
    assert unknown.returncode == 2 and f"--study 'quickstrat': no such study in {workdir} " in unknown.stderr
    assert "(the studies there: quickstart)" in unknown.stderr


def test_the_seed_spread_shows_every_seed_of_every_row_around_its_mean(site):
    """The seed-spread figure: one box per row, a dot per finished seed at its difference from the
    row's mean in % of it, the seed and value on hover; read from the store."""
    workdir, out = site
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("quickstart")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    assert "<h2>Seed spread</h2>" in page
    figs = [json.loads(m) for m in re.findall(r"var f=(\{.*?\});Plotly", page)]
    boxes = [t for f in figs if "Seed spread" in json.dumps(f["layout"].get("title", "")) for t in f["data"]]
    by_variant = {}
    for r in runs:
        by_variant.setdefault(r.data.tags["variant"], {})[int(r.data.tags["seed"])] = r.data.metrics["test_ppl"]
    assert sorted(html.unescape(t["name"]) for t in boxes) == sorted(by_variant)
    for t in boxes:
        seeds = by_variant[html.unescape(t["name"])]
        mean = sum(seeds.values()) / len(seeds)
        assert sorted(seed for seed, _ in t["customdata"]) == sorted(seeds)
        for (seed, value), y in zip(t["customdata"], t["y"]):
            assert abs(value - seeds[seed]) < 1e-9 and abs(y - 100 * (seeds[seed] / mean - 1)) < 1e-9


def test_a_store_copied_without_its_artifacts_says_what_is_missing(site, quickstart, tmp_path):
    """A tracking store brought back without its mlartifacts folder (as from the GPU machine, where
    only mlflow.db fit) still builds; the page says the per-position artifacts are missing instead
    of leaving the section out silently. With the artifacts the note is absent."""
    workdir = tmp_path / "copy"
    shutil.copytree(quickstart[0], workdir, ignore=shutil.ignore_patterns("site", "trials", "mlartifacts"))
    # The runs' recorded artifact folders as on the machine the store came from, which is not this one.
    with sqlite3.connect(workdir / "mlflow.db") as db:
        db.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, '/elsewhere')",
                   (str(quickstart[0].resolve()),))
    built = wb("dashboard", "--workdir", workdir, "--study", "quickstart", "--out", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-2000:]
    page = next((tmp_path / "site").glob("study-quickstart-*.html")).read_text()
    assert re.search(r"([1-9]\d*) of \1 finished runs have no per-position loss artifact", page)
    assert "<h2>Per-position loss</h2>" not in page
    full = next((site[1]).glob("study-quickstart-*.html")).read_text()
    assert "<h2>Per-position loss</h2>" in full and "have no per-position loss artifact" not in full


def test_untrusted_names_are_escaped(site):
    _, out = site
    page = next(p for p in out.glob("study-script-alert-1-script-*.html")).read_text()
    index = (out / "index.html").read_text()
    for text in (page, index):
        assert "<script>alert(" not in text and "<img src=x" not in text and "<b>base</b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in index


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium and chromedriver are not installed (Debian: chromium chromium-driver): "
                    "the browser test did NOT run")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    # A fresh profile of the test's own, outside the checkout.
    profile = tmp_path_factory.mktemp("chromium-profile")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def test_every_page_renders_in_chromium_without_errors(site, browser, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.support.ui import WebDriverWait

    _, out = site
    for page in sorted(out.glob("*.html")):
        browser.get(page.as_uri())
        figures = browser.execute_script("return document.querySelectorAll('.wb-figure').length")
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('.wb-figure')).every(f => f.querySelector('svg.main-svg'))"))
        rendered = browser.execute_script(
            "return Array.from(document.querySelectorAll('.wb-figure')).filter(f => f.querySelectorAll('g.trace, g.hm image').length > 0).length")
        assert rendered == figures, (page.name, rendered, figures)
        errors = browser.execute_script("return window.__wb_errors")
        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [] and severe == [], (page.name, errors, severe)
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018  (an injected alert() would be open here)
        if page.name.startswith("study-quickstart"):
            assert figures >= 3
            browser.save_screenshot(str(tmp_path / f"{page.stem}.png"))
            assert (tmp_path / f"{page.stem}.png").stat().st_size > 10_000
    h1 = browser.execute_script("return document.querySelector('h1') && document.querySelector('h1').textContent")
    assert h1 is not None


def test_serve_binds_loopback_and_prints_the_address(site):
    import urllib.request

    workdir, _ = site
    proc = subprocess.Popen([sys.executable, "-m", "foxwb.workbench.cli.main", "dashboard", "--workdir", str(workdir), "--out",
                             str(workdir / "served"), "--serve", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving on" not in line:
            line = proc.stdout.readline()
            assert line, "wb dashboard --serve exited without serving"
        address = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(address + "index.html", timeout=10) as response:
            assert "quickstart" in response.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cost_panel_shows_the_attention_pruning_would_keep(site):
    """Gated variants log acp_kept_fraction (tracking store); the page plots their means; the
    variant without a forget gate has none."""
    workdir, out = site
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("quickstart")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")
    kept = {}
    for r in runs:
        kept.setdefault(r.data.tags["variant"], []).append(r.data.metrics.get("acp_kept_fraction"))
    assert kept["FoX (Pro) - forget gate"] == [None, None]
    gated = kept["FoX (Pro)"]
    assert all(0 < k <= 1 for k in gated)
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    assert "attention kept (pruning threshold)" in panel_titles(page)
    assert f"{sum(gated) / len(gated)}"[:8] in page


def test_the_share_pruning_keeps_is_drawn_over_training_for_the_gated_rows(site):
    """Every validation of a gated trial logs acp_kept_fraction: the page draws its curve per row
    (the seeds' mean at each step from the store's history); the row without a forget gate has none."""
    import numpy as np

    from foxwb.dashboards.site import training_curves
    from foxwb.workbench.analysis import runs as results, table
    from foxwb.workbench.run.tracking import open_store

    workdir, out = site
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    assert "<h2>Share of causal pairs pruning keeps, during training</h2>" in page
    store = open_store(workdir, "quickstart")
    runs = results.finished_runs(store, "quickstart")
    frame = table.normalise(results.trial_runs(workdir, "quickstart", runs=runs))
    curves = training_curves(store, runs, frame, ["FoX (Pro)", "FoX (Pro) - forget gate"], "acp_kept_fraction")
    assert list(curves) == ["FoX (Pro)"]
    tokens, ys = curves["FoX (Pro)"]
    assert ys.shape == (2, len(tokens)) and len(tokens) >= 3
    run = next(r for r in runs if r.data.tags["variant"] == "FoX (Pro)" and r.data.tags["seed"] == "0")
    logged = {m.step: m.value for m in store.client.get_metric_history(run.info.run_id, "acp_kept_fraction")}
    assert list(tokens) == sorted(logged)
    assert ys.mean(0)[-1] == pytest.approx(np.mean([y[-1] for y in ys]))
    assert f"{ys.mean(0)[-1]}"[:8] in page


def test_cost_panel_shows_peak_memory(site):
    """On CPU the trials log the process's peak resident set; the page plots each variant's mean."""
    workdir, out = site
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("quickstart")
    runs = client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")
    rss = {}
    for r in runs:
        rss.setdefault(r.data.tags["variant"], []).append(r.data.metrics["peak_rss_mb"])
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    assert "peak memory (MB, host: no GPU)" in panel_titles(page)
    for values in rss.values():
        assert f"{sum(values) / len(values)}"[:7] in page


def test_cost_figure_groups_gpu_memory_and_shows_utilisation():
    """GPU memory in training and evaluation side by side in one panel, a bar per variant in its colour."""
    import polars as pl

    from foxwb.dashboards.figures import Colours, cost_figure, cost_panels

    frame = pl.DataFrame({"variant": ["a", "b"], "n_params": [1e6, 2e6], "tokens_per_s": [1e5, 9e4], "mfu": [0.4, 0.35],
                          "peak_memory_train_mb": [2000.0, 2600.0], "peak_memory_eval_mb": [800.0, 900.0],
                          "peak_rss_mb": [3000.0, 3100.0], "gpu_utilization_mean": [97.0, 88.0]})
    colours = Colours(["b", "a"])
    fig = cost_figure(frame, colours)
    titles = [a.text.replace("<br>", " ") for a in fig.layout.annotations]
    assert titles == ["parameters", "throughput (tokens/s)", "MFU", "peak memory (MB)", "GPU utilisation (%, mean)"]
    assert cost_panels(frame)[1] == []  # nothing left out
    bars = {(t.meta["colour_of"], tuple(t.x)): list(t.y) for t in fig.data}
    assert bars[("a", ("GPU, training", "GPU, evaluation"))] == [2000.0, 800.0]
    assert bars[("b", ("GPU, training", "GPU, evaluation"))] == [2600.0, 900.0]
    assert bars[("b", ("gpu_utilization_mean",))] == [88.0] and not any("peak_rss_mb" in x for _, x in bars)
    assert {t.meta["colour_of"]: t.marker.color for t in fig.data} == {"a": colours("a"), "b": colours("b")}
    # Without a GPU: no MFU or utilisation panel drawn empty, a sentence for each instead.
    cpu = frame.drop("mfu", "peak_memory_train_mb", "peak_memory_eval_mb", "gpu_utilization_mean")
    titles = [a.text.replace("<br>", " ") for a in cost_figure(cpu).layout.annotations]
    assert titles == ["parameters", "throughput (tokens/s)", "peak memory (MB, host: no GPU)"]
    assert [s.split(":")[0] for s in cost_panels(cpu)[1]] == ["MFU", "GPU memory", "GPU utilisation"]


def test_which_heads_forget_per_layer_and_head(site):
    """The heatmap section is on the page, and its maps are the per-seed means of each gated
    trial's logged per-head shares (the variant without a forget gate has none)."""
    import numpy as np

    from foxwb.dashboards.site import forgetting_heads
    from foxwb.workbench.analysis import runs as results
    from foxwb.workbench.run.tracking import open_store

    workdir, out = site
    page = next(p for p in out.glob("study-quickstart-*.html")).read_text()
    assert "<h2>Which heads forget</h2>" in page and '"type":"heatmap"' in page
    store = open_store(workdir, "quickstart")
    runs = results.finished_runs(store, "quickstart")
    frame = results.trial_runs(workdir, "quickstart", runs=runs)
    maps, log_eps = forgetting_heads(store, runs, frame, ["FoX (Pro)", "FoX (Pro) - forget gate"])
    assert set(maps) == {"FoX (Pro)"} and log_eps == -10.0
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    seeds = []
    for r in runs:
        if r.data.tags["variant"] == "FoX (Pro)":
            path = client.download_artifacts(r.info.run_id, "acp_kept_per_head.json", str(workdir / r.info.run_id))
            seeds.append(np.array(__import__("json").loads(Path(path).read_text())["per_head"]))
    assert len(seeds) == 2 and maps["FoX (Pro)"].shape == (2, 4)
    np.testing.assert_allclose(maps["FoX (Pro)"], np.mean(seeds, axis=0))


def _finished(workdir, experiment):
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")


def test_failed_rows_reasons_and_kind_names_show_in_chromium(site, browser):
    """The rows that failed are in the table with their counts, the reason on hover (the cell's
    title), and a slot holding a kind that is not the paper's shows the kind's name, a plug-in's
    (`l2norm`) as a built-in's (`bias_only`); the paper's kinds show a check."""
    from selenium.webdriver.common.by import By

    _, out = site
    browser.get(next(out.glob("study-mix-*.html")).as_uri())
    rows = {r.find_element(By.CSS_SELECTOR, "td.variant").text: r
            for r in browser.find_elements(By.CSS_SELECTOR, "table.ablation tbody tr")}
    assert list(rows) == ["FoX (Pro)", "raises", "L2 QK-norm", "bias-only gate"]
    failed = rows["raises"].find_element(By.CSS_SELECTOR, "td.runs")
    assert failed.is_displayed() and failed.text == "2 failed"
    assert "no such file or folder" in failed.get_attribute("title") and "seed 0 (failed)" in failed.get_attribute("title")
    assert rows["raises"].find_element(By.CSS_SELECTOR, "span.fewer").text == "0/2"
    kinds = {r: [k.text for k in rows[r].find_elements(By.CSS_SELECTOR, "td.mark span.kind")] for r in rows}
    assert kinds == {"FoX (Pro)": [], "raises": [], "L2 QK-norm": ["l2norm"], "bias-only gate": ["bias_only"]}
    assert all(k.is_displayed() for k in rows["L2 QK-norm"].find_elements(By.CSS_SELECTOR, "span.kind"))
    # The plug-in kind's option shows under its name, and on hover with the kind.
    cell = next(c for c in rows["L2 QK-norm"].find_elements(By.CSS_SELECTOR, "td.mark") if c.text.startswith("l2norm"))
    assert [o.text for o in cell.find_elements(By.CSS_SELECTOR, "span.option")] == ["init_scale: 0.5"]
    assert cell.get_attribute("title") == "l2norm (init_scale: 0.5)"
    assert rows["FoX (Pro)"].find_elements(By.CSS_SELECTOR, "span.option") == []  # the presets' kinds at their defaults
    checks = [c.text for c in rows["FoX (Pro)"].find_elements(By.CSS_SELECTOR, "td.mark")]
    assert checks.count("\u2713") == 5 and checks[0] == ""  # every Pro slot but RoPE
    assert rows["L2 QK-norm"].find_element(By.CSS_SELECTOR, "td.runs").text == "2 finished"


def test_wb_results_shows_the_failures_and_kinds_of_the_same_store(site):
    workdir, _ = site
    proc = wb("results", "mix", "--workdir", workdir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    raises = next(l for l in lines if l.startswith("raises "))
    assert "0/2!" in raises and "2 failed" in raises
    assert "qk_norm=l2norm" in next(l for l in lines if l.startswith("L2 QK-norm "))
    assert "runs that did not finish, with their reasons:" in proc.stdout
    assert sum("raises / seed" in l and "(failed): SpecError: data.paths[0]: no such file or folder" in l for l in lines) == 2


def test_the_index_lists_every_study_with_its_trials_base_and_best_row(site):
    workdir, out = site
    index = (out / "index.html").read_text()
    row = re.search(r'<tr><td><a href="study-mix-[^"]+">mix</a></td>(.*?)</tr>', index).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    values = {r.data.tags["variant"]: [] for r in _finished(workdir, "mix")}
    for r in _finished(workdir, "mix"):
        values[r.data.tags["variant"]].append(r.data.metrics["test_ppl"])
    best = min(values, key=lambda v: sum(values[v]) / len(values[v]))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", cells[0]) and cells[1:4] == ["4", "6", "2"]
    assert cells[4] == "FoX (Pro)" and cells[5] == f"{html.escape(best)} ({sum(values[best]) / len(values[best]):.3f})"


def test_two_studies_side_by_side(site):
    """`wb results A B`: the rows both studies have, each one's mean and CI and B - A with
    Welch's CI and p, from the store's values (scipy's Welch test by hand)."""
    from scipy import stats as sps

    workdir, _ = site
    proc = wb("results", "quickstart", "mix", "--workdir", workdir)
    assert proc.returncode == 0, proc.stderr
    a = [r.data.metrics["test_ppl"] for r in _finished(workdir, "quickstart") if r.data.tags["variant"] == "FoX (Pro)"]
    b = [r.data.metrics["test_ppl"] for r in _finished(workdir, "mix") if r.data.tags["variant"] == "FoX (Pro)"]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("FoX (Pro) "))
    test = sps.ttest_ind(b, a, equal_var=False)
    low, high = test.confidence_interval(0.95)
    assert f"{sum(a) / 2:.3f}" in line and f"{sum(b) / 2:.3f}" in line
    assert f"{sum(b) / 2 - sum(a) / 2:+.3f} ±{(high - low) / 2:.3f}" in line and f"{test.pvalue:.3g}" in line
    assert "only in 'quickstart': FoX (Pro) - KV-shift, FoX (Pro) - forget gate" in proc.stdout


def test_a_row_compared_unpaired_shows_welchs_interval_in_the_table():
    """A variant declared `test: welch` (tagged on the parent run): its cell gives Welch's CI over
    all the seeds of each row, not a paired one, and the p column says which tests it holds."""
    import polars as pl

    from foxwb.dashboards.figures import ablation_table
    from foxwb.workbench.analysis.table import study_info, study_table

    values = {"base": [10.0, 10.02, 9.99], "noisy": [10.9, 10.2, 11.3, 10.4, 10.7]}
    runs = pl.DataFrame([{"variant": v, "seed": s, "search_point": "", "stopped_early": False, "status": "FINISHED",
                          "val_ppl": x} for v, xs in values.items() for s, x in enumerate(xs)])
    info = study_info("s", runs, None, {"variants": json.dumps(list(values)), "base_variant": "base", "seeds": "[0, 1, 2]",
                                        "variant_seeds": json.dumps({"noisy": [0, 1, 2, 3, 4]}), "welch": '["noisy"]'})
    rows = study_table(runs, info)
    noisy = rows.filter(pl.col("row") == "noisy").row(0, named=True)
    page = ablation_table(rows, info)
    assert f'Welch {noisy["delta"]:+.3f} &plusmn; {noisy["welch_ci95"]:.3f}' in page and "5 and 3 seeds of base" in page
    assert "p (Holm)</th>" in page and ">paired " not in page


def test_one_colour_per_variant_in_every_figure_of_a_page(site):
    """Every figure of a study's page draws a variant in one colour (the loss curves, the seed
    spread, the share pruning keeps, the cost panels...), and two variants in two colours, in the
    study's variant order (as tagged on its parent run)."""
    workdir, out = site
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    for study, pattern in (("quickstart", "study-quickstart-*.html"), ("mix", "study-mix-*.html")):
        figs = figures_of(next(out.glob(pattern)).read_text())
        colours = colours_by_name(figs)
        exp = client.get_experiment_by_name(study)
        variants = json.loads(client.search_runs([exp.experiment_id], "tags.wb_kind = 'study'")[0].data.tags["variants"])
        drawn = [v for v in variants if v in colours]
        assert len(drawn) >= 3, (study, colours)
        assert all(len(colours[v]) == 1 for v in drawn), {v: colours[v] for v in drawn}
        assert len({next(iter(colours[v])) for v in drawn}) == len(drawn)
        # Each variant in several figures: the consistency is across figures, not within one.
        shown_in = {v: sum(any((t.get("meta") or {}).get("colour_of") == v for t in f["data"]) for f in figs) for v in drawn}
        assert min(shown_in.values()) >= 3, shown_in
    from foxwb.dashboards.figures import PALETTE

    first = figures_of(next(out.glob("study-quickstart-*.html")).read_text())
    assert colours_by_name(first)["FoX (Pro)"] == {PALETTE[0]}  # the study's first variant, the palette's first colour


def test_the_p_columns_are_named_as_the_cli_names_them(site):
    """The table's and the claims' p are Holm-adjusted, headed "p (Holm)" (and "p equiv (Holm)"),
    with the unadjusted p on hover, named "p (unadjusted)" (as `wb results` names them)."""
    _, out = site
    page = next(out.glob("study-quickstart-*.html")).read_text()
    claims = page[page.index('<section id="claims">'):page.index("</section>", page.index('<section id="claims">'))]
    assert "<th>p (Holm)</th><th>p equiv (Holm)</th>" in claims
    assert re.search(r'<td class="num" title="p \(unadjusted\) = [0-9.e-]+">', claims)
    head = re.search(r'<table class="ablation"><thead>(.*?)</thead>', page).group(1)
    assert re.findall(r"<th[^>]*>(.*?)</th>", head).count("p (Holm)") == 1
    assert re.search(r'<td class="num p" title="p \(unadjusted\) = [0-9.e-]+">[0-9.e-]+</td>', page)
    assert "p (paired" not in page and "p_value" not in page


# What a reader sees at a width: the page does not scroll sideways, no number breaks over two lines,
# no title of a figure runs into another or out of its figure.
LAYOUT_JS = """
var out = {width: window.innerWidth, overflow: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
           wrapped: [], overlaps: [], outside: [], titles: 0};
document.querySelectorAll('td.num').forEach(function (td) {
  if (getComputedStyle(td).whiteSpace !== 'nowrap') { out.wrapped.push('no nowrap: ' + td.textContent); return; }
  var walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT), node;
  while ((node = walk.nextNode())) {
    if (!node.textContent.trim() || node.parentElement.closest('.vs, .chosen')) continue;  // labels, not numbers
    var range = document.createRange(); range.selectNodeContents(node);
    var tops = new Set(Array.from(range.getClientRects()).map(function (r) { return Math.round(r.top); }));
    if (tops.size > 1) out.wrapped.push(td.textContent);
  }
});
document.querySelectorAll('.wb-figure').forEach(function (fig) {
  var box = fig.getBoundingClientRect();
  var texts = Array.from(fig.querySelectorAll('text[class$="title"], text.annotation-text'))
    .map(function (e) { return {text: e.textContent, r: e.getBoundingClientRect()}; })
    .filter(function (e) { return e.r.width > 0 && e.r.height > 0; });
  out.titles += texts.length;
  texts.forEach(function (a, i) {
    if (a.r.left < box.left - 1 || a.r.right > box.right + 1) out.outside.push(a.text);
    texts.slice(i + 1).forEach(function (b) {
      if (a.r.left < b.r.right - 1 && b.r.left < a.r.right - 1 && a.r.top < b.r.bottom - 1 && b.r.top < a.r.bottom - 1)
        out.overlaps.push([a.text, b.text]);
    });
  });
});
return out;
"""


def check_layout(browser, page: Path, width: int) -> dict:
    """``page`` opened at ``width`` px: LAYOUT_JS's findings."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(width, 1400)
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('.wb-figure')).every(f => f.querySelector('svg.main-svg'))"))
    return browser.execute_script(LAYOUT_JS)


@pytest.mark.parametrize("width", [1024, 1600])
def test_every_page_reads_at_the_width_of_a_laptop_and_of_a_desktop(site, browser, width):
    _, out = site
    try:
        for page in sorted(out.glob("*.html")):
            found = check_layout(browser, page, width)
            assert width - 20 <= found["width"] <= width, found["width"]
            scroll, client = found["overflow"]
            assert scroll <= client, f"{page.name} at {width} px: the page scrolls sideways ({scroll} > {client})"
            assert found["wrapped"] == [], (page.name, width, found["wrapped"])
            assert found["overlaps"] == [], (page.name, width, found["overlaps"])
            assert found["outside"] == [], (page.name, width, found["outside"])
            if page.name.startswith("study-quickstart"):
                assert found["titles"] >= 15  # the figures' own titles, subplots' and axes' were all compared
    finally:
        browser.set_window_size(1300, 2400)


def test_a_panel_without_data_is_not_drawn_but_named(site):
    """On CPU no run records MFU or GPU use: the cost figure draws no empty panel for them, and a
    sentence under it says what is absent and why."""
    _, out = site
    page = next(out.glob("study-quickstart-*.html")).read_text()
    titles = panel_titles(page)
    assert "parameters" in titles and not any(t.startswith(("MFU", "GPU utilisation")) for t in titles)
    assert '<p class="note absent">MFU: no run records it' in page
    assert '<p class="note absent">GPU utilisation: no run records it' in page


def _search_run(variant, seed, values, loss, **tags):
    from types import SimpleNamespace

    tags = {"variant": variant, "seed": str(seed), "search_values": json.dumps(values), **tags}
    return SimpleNamespace(info=SimpleNamespace(run_id=f"{variant}-{seed}-{values}", status="FINISHED"),
                           data=SimpleNamespace(tags=tags, metrics={"val_loss": loss}, params={p: str(v) for p, v in values.items()}))


def test_the_sensitivity_figure_draws_means_with_their_intervals_over_seeds():
    """Per variant and searched value one point, the mean over its seeds with its 95% t interval as
    error bars; the seeds faint behind it; a log axis for a field searched log-uniformly; the
    variants in the page's colours. A run ASHA stopped early and a confirmation run are no points."""
    import numpy as np
    from scipy import stats as sps

    from foxwb.dashboards import figures
    from foxwb.dashboards.site import searched_space, sensitivity_points

    rng = np.random.default_rng(0)
    lrs = [1e-3, 3e-3, 1e-2]
    losses = {(v, lr, s): 3 + abs(np.log10(lr) + 2.5) * (1 + (v == "B")) + rng.normal(0, 0.05)
              for v in ("A", "B") for lr in lrs for s in range(3)}
    runs = [_search_run(v, s, {"train.lr": lr}, y) for (v, lr, s), y in losses.items()]
    runs += [_search_run("A", 3, {"train.lr": 1e-3}, 9.0, stopped_early="true"),
             _search_run("A", 4, {"train.lr": 1e-3}, 9.0, stage="confirm")]
    ladder = _search_run("A", 0, {"size": "d16"}, 9.0)  # a scaling design's point is no searched field
    ladder.data.params.clear()
    runs.append(ladder)
    points = sensitivity_points(runs)
    assert points.height == 18
    space = searched_space({"search_space": json.dumps({"train.lr": {"loguniform": [1e-3, 1e-2]}})})
    assert space == {"train.lr": "loguniform"}
    log = {p for p in ("train.lr",) if figures.log_scaled(points["value"].to_list(), space.get(p))}
    colours = figures.Colours(["B", "A"])
    fig = figures.sensitivity_figure(points, "val_loss", colours, log).to_dict()
    assert fig["layout"]["xaxis"]["type"] == "log"
    means = [t for t in fig["data"] if t["meta"]["role"] == "mean"]
    seeds = [t for t in fig["data"] if t["meta"]["role"] == "seed"]
    assert sorted(t["name"] for t in means) == ["A", "B"] and len(seeds) == 2
    for t in means:
        v = t["name"]
        assert list(t["x"]) == lrs  # one point per searched value
        want = [np.mean([losses[(v, lr, s)] for s in range(3)]) for lr in lrs]
        half = [sps.t.ppf(0.975, 2) * np.std([losses[(v, lr, s)] for s in range(3)], ddof=1) / np.sqrt(3) for lr in lrs]
        assert list(t["y"]) == pytest.approx(want) and t["error_y"]["visible"]
        assert list(t["error_y"]["array"]) == pytest.approx(half)
        assert t["line"]["color"] == colours(v) and t["mode"] == "lines+markers"
    for t in seeds:
        assert len(t["x"]) == 9 and t["marker"]["opacity"] < 0.5 and t["marker"]["color"] == colours(t["meta"]["colour_of"])
        assert 9.0 not in list(t["y"])
    # Declared uniform: a linear axis, however wide the values.
    assert not figures.log_scaled(lrs, "uniform") and figures.log_scaled([0.5, 0.6], "loguniform")


@pytest.mark.parametrize("values, log", [([1e-4, 2e-4, 8e-3], True), ([1e-3, 3e-3, 1e-2, 3e-2], True), ([0.003, 0.01], True),
                                         ([1, 2, 3, 4], False), ([64, 128], False), ([0.0, 0.5, 1.0], False),
                                         (["rmsnorm", "none"], False)])
def test_a_searched_field_reads_on_a_log_axis_when_its_values_are_spaced_in_log(values, log):
    """Without the search space recorded on the parent run, the values tell: over a factor of 10,
    or evenly spaced in log."""
    from foxwb.dashboards.figures import log_scaled

    assert log_scaled(values) == log
