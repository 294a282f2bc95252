"""A tune-then-confirm study's page (dashboards/confirm_page.py), built from the tiny random search with
ASHA of tests/workbench/run/test_confirm.py (run once per session: tests/conftest.py's
random_search_confirmed) and opened in headless Chromium: beside the table, per variant, its
search trials against the searched learning rate, the trial ASHA stopped drawn apart, the chosen
point marked and the confirmation runs, all read back against the store."""
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.dashboards.test_site import browser  # noqa: F401  (the module's headless Chromium fixture)
from tests.dashboards.test_site import colours_by_name, figures_of
from tests.cli import wb

ROOT = Path(__file__).resolve().parents[2]
SEARCH, STOPPED, CHOSEN, CONFIRMATION = ("search trial", "search trial stopped early by ASHA (its last validation)",
                                         "chosen point (mean over its search seeds)", "confirmation run")


@pytest.fixture(scope="module")
def page(random_search_confirmed, tmp_path_factory):
    workdir, proc, _ = random_search_confirmed
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path_factory.mktemp("confirm-site")
    built = wb("dashboard", "--workdir", workdir, "--out", out)
    assert built.returncode == 0, built.stderr[-3000:]
    return workdir, next(out.glob("study-tuned-*.html"))


def expected(workdir):
    """variant -> kind -> sorted (lr, val_loss) points, and the choices, read from the store by hand."""
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("tuned")
    parent = client.search_runs([exp.experiment_id], "tags.wb_kind = 'study'")[0]
    choice = json.loads(parent.data.tags["confirm_choice"])
    points = {v: {SEARCH: [], STOPPED: [], CONFIRMATION: []} for v in choice}
    for r in client.search_runs([exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'"):
        v, lr, loss = r.data.tags["variant"], float(r.data.params["train.lr"]), r.data.metrics["val_loss"]
        stopped = r.data.tags.get("stopped_early") == "true"
        if r.data.tags.get("stage") != "confirm":
            points[v][STOPPED if stopped else SEARCH].append((lr, loss))
        if lr == choice[v]["values"]["train.lr"] and r.data.tags["seed"] in ("0", "1") and not stopped:
            points[v][CONFIRMATION].append((lr, loss))
    for v in choice:
        points[v][CHOSEN] = [(choice[v]["values"]["train.lr"], choice[v]["mean"])]
    return {v: {k: sorted(p) for k, p in kinds.items()} for v, kinds in points.items()}, choice


def test_each_variants_search_and_its_confirmation_show_beside_the_table(page, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    workdir, path = page
    want, choice = expected(workdir)
    assert sum(len(k[STOPPED]) for k in want.values()) >= 1  # something for the figure to draw apart
    browser.get(path.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('.wb-figure')).every(f => f.querySelector('svg.main-svg'))"))
    assert browser.execute_script("return window.__wb_errors") == []
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []

    # Beside the table (after the claims' verdicts): its section comes next, and the generic
    # sensitivity figure, which would mix the confirmation runs into the search's points, is not on the page.
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "h2")]
    assert headings[:3] == ["Claims", "Ablation table", "Search and confirmation"] and "Hyperparameter sensitivity" not in headings
    section = browser.find_element(By.ID, "search-and-confirmation")
    assert section.is_displayed()
    texts = lambda css: browser.execute_script(  # noqa: E731
        f"return Array.from(document.querySelectorAll('#search-and-confirmation {css}')).map(e => e.textContent)")
    assert texts(".annotation-text") == ["FoX (Pro)", "no gate"]  # a panel per variant
    assert sorted(texts(".legendtext")) == sorted([SEARCH, STOPPED, CHOSEN, CONFIRMATION])

    # Every point drawn is the store's, in its variant's panel, drawn as its kind.
    traces = browser.execute_script(
        "return document.querySelector('#search-and-confirmation .wb-figure').data.map(t => "
        "({meta: t.meta, x: Array.from(t.x), y: Array.from(t.y), xaxis: t.xaxis, hover: t.hovertemplate, "
        "color: t.marker.color}))")
    # The legend: one grey entry per kind, drawing no point; the panels' points name their variant.
    assert sorted(t["meta"]["legend"] for t in traces if "legend" in t["meta"]) == sorted([SEARCH, STOPPED, CHOSEN, CONFIRMATION])
    traces = [t for t in traces if "legend" not in t["meta"]]
    drawn = {}
    for t in traces:
        drawn.setdefault(t["meta"]["variant"], {})[t["meta"]["kind"]] = sorted(zip(t["x"], t["y"]))
        assert t["xaxis"] == ("x" if t["meta"]["variant"] == "FoX (Pro)" else "x2")
    for variant, kinds in want.items():
        for kind, pts in kinds.items():
            got = drawn[variant].get(kind, [])
            assert len(got) == len(pts) and all(g == pytest.approx(p) for g, p in zip(got, pts)), (variant, kind, got, pts)
    # The learning rate was searched log-uniformly: every panel's axis is log, the same for both variants.
    layout = browser.execute_script("return document.querySelector('#search-and-confirmation .wb-figure').layout")
    assert layout["xaxis"]["type"] == layout["xaxis2"]["type"] == "log"
    # A search trial and a confirmation run in their variant's colour, as in every figure of the page.
    page_colours = colours_by_name(figures_of(path.read_text()))
    for t in traces:
        if t["meta"]["kind"] in (SEARCH, CONFIRMATION):
            assert t["meta"]["colour_of"] == t["meta"]["variant"] and page_colours[t["meta"]["variant"]] == {t["color"]}
    assert page_colours["FoX (Pro)"] != page_colours["no gate"]
    n_points = sum(len(t["x"]) for t in traces)
    assert browser.execute_script(
        "return document.querySelectorAll('#search-and-confirmation g.points path.point').length") == n_points
    # The confirmation run on seed 0 is the search trial at the chosen point: its hover says so.
    hovers = [h for t in traces if t["meta"]["kind"] == CONFIRMATION for h in t["hover"]]
    assert sum("a search trial too" in h for h in hovers) == 2 and len(hovers) == 4
    assert all("stopped early by ASHA at 4,096 tokens" in h for t in traces if t["meta"]["kind"] == STOPPED for h in t["hover"])

    # The choice in words, per variant, as the user reads it.
    items = [li.text for li in section.find_elements(By.CSS_SELECTOR, "li.choice")]
    assert len(items) == 2
    for item, variant in zip(items, ("FoX (Pro)", "no gate")):
        mine = want[variant]
        confirmed = sorted(loss for _, loss in mine[CONFIRMATION])
        assert item.startswith(f"{variant}: chose {choice[variant]['point']} (val_loss {choice[variant]['mean']:.4f}, "
                               "mean over 1 search seed)"), item
        assert f"among {len(mine[SEARCH])} search trials that ran to the end; {len(mine[STOPPED])} stopped early" in item
        assert f"mean {sum(confirmed) / 2:.4f}" in item and all(f"{v:.4f}" in item for v in confirmed)


def test_the_table_note_says_what_a_confirmation_row_is_compared_with(page):
    """The page's note under the table explains the chosen values and the comparison of a
    confirmation row (the same words as `wb results`' footnote), and names spikes once."""
    import html as html_lib

    _, path = page
    text = html_lib.unescape(path.read_text())
    assert "Chosen: a confirmation row's searched values, each variant's best search point, run on the confirmation seeds" in text
    assert "compared with the base's confirmation row, at the base's own choice" in text
    assert "Spikes: spikes" not in text and "\u26a1 Spikes: of a row's finished runs" in text
    # The confirmation rows are the table; the search rows stand apart below it, in a table of their own.
    import re

    tables = re.findall(r'<table class="(ablation[^"]*)">(.*?)</table>', path.read_text(), re.S)
    assert [c for c, _ in tables] == ["ablation", "ablation search"]
    names = [re.findall(r'<td class="variant">([^<]*)', body) for _, body in tables]
    assert names[0] and not any("[" in n for n in names[0]) and all("[lr=" in n for n in names[1]), names
    assert "Search, beside the table" in text


def test_the_index_counts_each_trial_once(page):
    """A confirmation row holds the search trial at its chosen point too: the index's trials
    finished count each tracked trial once (8: 6 search draws, 2 confirmation runs)."""
    import re

    workdir, path = page
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("tuned")
    finished = {r.data.tags["spec_hash"] for r in client.search_runs(
        [exp.experiment_id], "tags.wb_kind = 'trial' and attributes.status = 'FINISHED'")}
    row = re.search(r'<tr><td><a href="study-tuned-[^"]+">tuned</a></td>(.*?)</tr>',
                    (path.parent / "index.html").read_text()).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert len(finished) == 8 and cells[2:4] == ["8", "0"], cells
