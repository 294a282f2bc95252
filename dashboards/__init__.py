"""The dashboard: plotly figures (figures.py), the study page's verdict table (claims_table.py), a
tune-then-confirm study's search (confirm_page.py), the static site (site.py) and a figure as a PNG
(png.py). Every page's HTML comes from the Jinja2 templates in templates/, autoescaped: a name from
the store is text wherever it lands, and no module escapes by hand (plotly's own strings apart:
figures.esc)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"


@lru_cache(maxsize=1)
def _environment():
    import jinja2  # the site's builders only: `wb` imports the package for its figures too

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    # Table rows on one line each: readers of the page (and its tests) match a row by its markup.
    env.filters["spaceless"] = lambda text: Markup(re.sub(r">\s+<", "><", str(text).strip()))
    return env


def render(template: str, **context) -> Markup:
    """``templates/<template>`` rendered with ``context``; safe to embed in another template."""
    return Markup(_environment().get_template(template).render(**context))
