"""The driver's hold on a study while it runs: the lease, the stops, and closing the books.

``Driver`` (a context manager around the part of ``run_study`` that writes) claims the study's
lease (foxwb.workbench.run.lease), catches SIGINT and SIGTERM (foxwb.workbench.run.stops), watches the Ray cluster, and
whatever ends the study makes the store tell the truth: trials that were running are KILLED with
the reason, the parent run is FINISHED, FAILED or KILLED, and the lease is released. Where Ray is
lost under the study Tune would hang on it, so the watcher closes the books itself, prints the
summary (``report``) and ends the process.
"""
from __future__ import annotations

import os
import sys
import threading

from foxwb.workbench.run import live_view as progress
from foxwb.workbench.train.faults import quiet_store_logs, sentence
from foxwb.workbench.run.lease import Lease
from foxwb.workbench.run.stops import Stops, gcs_address, watch_gcs

EXIT_INTERRUPTED = 130


class Driver:
    def __init__(self, store, parent_id: str, study: str, take_over: bool = False, report=None):
        self.store, self.parent_id, self.study = store, parent_id, study
        self.stops = Stops()
        self.lock = threading.RLock()  # one writer at a time: Tune's callbacks, the heartbeat, the watchers
        self.lease = Lease(store.client, parent_id, study, self.lock)
        self.take_over, self.report = take_over, report
        self.run = None  # the StudyRun, once its outcomes exist
        self._watch = None
        self._closed = False

    def __reduce__(self):
        # Tune pickles its run settings (the tracking callback holds the driver) into its own
        # experiment state, which the workbench never restores: threads and locks stay behind.
        return (_not_restored, ())

    def __enter__(self) -> "Driver":
        quiet_store_logs()
        self.lease.claim(self.take_over, on_lost=lambda reason: self.stops.request("lease", reason))
        self.stops.install()
        return self

    def __exit__(self, kind, error, tb) -> None:
        self.stops.uninstall()
        if self._watch is not None:
            self._watch.set()
        if error is not None and not self._closed:
            self.stops.request("error", f"the driver failed: {sentence(error)}")
            self.close()
        self.lease.release()

    def watch_ray(self) -> None:
        address = gcs_address()
        if address:
            self._watch = watch_gcs(address, self._ray_lost)

    def _ray_lost(self, reason: str) -> None:
        if self.stops.kind == "interrupted":  # a signal to the whole process group ended Ray's processes too
            progress.say("Ray's processes stopped with the driver; closing the study's runs")
        else:
            self.stops.request("ray", reason)
            progress.say(f"error: {reason}; closing the study's runs")
        if self.report is None:
            # Called from Python (run_study without a report): the process is the caller's, not
            # ours to end; the study stops at Tune's next check and run_study returns.
            self.close()
            return
        if not self.lock.acquire(timeout=10):  # a write stuck on the store: close without it
            os._exit(1)
        try:
            self.close()
            self.lease.release()
            if self.run is not None:
                self.run.stopped, self.run.reason = self.stops.kind, self.stops.reason
            code = self.report(self.run) if (self.report and self.run is not None) else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code or 1)

    def close(self) -> None:
        """Trials still running: KILLED with the stop's reason; the parent run ended."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            outcomes = self.run.outcomes.values() if self.run is not None else []
            reason = self.stops.reason or "the driver stopped before this trial finished"
            stopped = [out for out in outcomes if out.status == "RUNNING"]
            for out in stopped:
                out.status, out.reason = "KILLED", reason
            try:
                for out in stopped:
                    if out.run_id:
                        self.store.kill_trial(out.run_id, reason)
                failed = sum(o.status != "FINISHED" for o in outcomes)
                status = {"interrupted": "KILLED", "output": "KILLED"}.get(self.stops.kind, "FAILED" if self.stops else None)
                self.store.end_study(self.parent_id, failed, status)
            except Exception as e:  # the store itself failed: the summary says so
                self.stops.request("store", f"the tracking store could not be written: {sentence(e)}")
                progress.say(f"error: the tracking store could not be written: {sentence(e)}")


def _not_restored() -> None:
    return None
