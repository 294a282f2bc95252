"""Starting a Ray of the workbench's own on this machine.

Ray 2.60 turns token authentication on for every new local cluster and logs a warning saying
so each time. The workbench keeps the authentication and drops only that line: it is printed on
every ``wb run`` and ``wb train`` and tells the user nothing they act on. Off a terminal the
workers' forwarded lines come without colour codes.
"""
from __future__ import annotations

import logging
import os
import sys

_NOTICE = "Token authentication is enabled for this Ray cluster"


def _not_the_auth_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(_NOTICE)


def start(address: str = "local", *, log_to_driver: bool) -> None:
    """``ray.init`` on ``address`` (``"local"``: always a new Ray of our own, never a cluster
    recorded by an earlier ``ray start``), without Ray's dashboard or its logging setup."""
    # Ray is slow to import, and the dry run imports this module (through the runner): only when
    # a Ray is started.
    import ray

    if log_to_driver and not (sys.stderr.isatty() and sys.stdout.isatty()):
        # The workers' lines come with colour codes around their "(actor pid=...)" prefix: not in a
        # log file or a pipe.
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    auth_log.addFilter(_not_the_auth_notice)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=log_to_driver, configure_logging=False)
    finally:
        auth_log.removeFilter(_not_the_auth_notice)
