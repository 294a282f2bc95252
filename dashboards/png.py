"""A dashboard figure written as a PNG (plotly + kaleido, which drives a local Chrome or Chromium;
set BROWSER_PATH if it is not found), for the docs' figures."""
from __future__ import annotations

from pathlib import Path


def write_png(fig, path: Path, attempts: int = 3) -> None:
    """The figure as a PNG through kaleido. On a busy machine kaleido 1.x can call into the page
    before the page's own script has run in it ("ReferenceError: kaleido_scopes is not defined",
    seen once in a CI run beside a study and another suite); each attempt starts a fresh browser,
    so that error is retried, any other raised at once."""
    for attempt in range(1, attempts + 1):
        try:
            fig.write_image(str(path), scale=1)
            return
        except Exception as e:  # kaleido's JavascriptError, whose module path is private
            if "kaleido_scopes is not defined" not in str(e) or attempt == attempts:
                raise
            print(f"kaleido's page was not ready (attempt {attempt} of {attempts}): rendering again")
