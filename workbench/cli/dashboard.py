"""``wb dashboard``: the static dashboard site built from the tracking store, and served on
127.0.0.1 with --serve. Each study page's figures also go to the study's MLflow parent run
(``figures/<name>.html``), replacing those of the last build."""
from __future__ import annotations

import argparse
import functools
import http.server
import sys
from pathlib import Path

from foxwb.dashboards.site import build_site
from foxwb.workbench.run.tracking import local_tracking_uri
from foxwb.workbench.spec.errors import SpecError
from foxwb.workbench.spec.study import load_study
from foxwb.workbench.train import faults, layout


def command(args: argparse.Namespace) -> int:
    workdir = Path(args.workdir)
    if args.serve and not 0 <= args.port <= 65535:
        raise SpecError(f"--port {args.port}: a port is 0-65535 (0: any free one)")
    if not layout.has_store(workdir, args.tracking_uri):
        raise SpecError(f"--workdir {workdir}: no tracking store here (mlflow.db); run a study first")
    out = Path(args.out) if args.out else workdir / "dashboard"
    faults.check_folder(out, "--out" if args.out else "the dashboard folder", write=True)
    try:
        # --study takes a study's name or its file, as `wb results` and `wb status` do.
        only = (load_study(args.study).name if args.study and args.study.endswith((".yaml", ".yml"))
                else args.study)
        pages = build_site(args.tracking_uri or local_tracking_uri(workdir), out, layout.artifacts(workdir), only,
                           where=str(args.tracking_uri or workdir), figures_to=log_figures)
    except ValueError as e:
        raise SpecError(str(e)) from None
    print(f"dashboard: {out / 'index.html'} ({len(pages)} {'study' if len(pages) == 1 else 'studies'})")
    if args.serve:
        serve(out, args.port)
    return 0


def log_figures(store, study: str, figures: dict) -> None:
    """The page's figures onto the study's parent run. A store that cannot take them (no parent
    run, an artifact store or server this user cannot write to) gets one line: the site is built all the same."""
    parent = store.study_parent(study)
    if parent is None:
        print(f"note: the figures of study {study!r} are not in MLflow: it has no parent run there", file=sys.stderr)
        return
    try:
        store.log_figures(parent, figures)
    except Exception as e:  # any store's error (MLflow's, the artifact store's, the OS's): the site stands
        print(f"note: the figures of study {study!r} are not in MLflow (parent run {parent}): {faults.sentence(e)}",
              file=sys.stderr)


def serve(out: Path, port: int) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as e:
        raise SpecError(f"--port {port}: cannot serve on 127.0.0.1:{port} ({e.strerror}); "
                        "pass another --port, or --port 0 for any free one") from None
    print(f"serving on http://127.0.0.1:{server.server_address[1]}/  (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
