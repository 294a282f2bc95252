"""A study on Ray Tune (and Ray Train for multi-worker trials), tracked by the driver in MLflow.

- ``runner``: the trials not done yet, on Ray Tune; ``tracking_callback``: the driver's Tune
  callback, which writes each trial's run in the store.
- ``confirm``: tune, then confirm (a study's ``search.confirm``).
- ``rerun``: redo trials on purpose (``wb run --rerun``).
- ``tune_trial``: the trainables Tune runs in its workers; ``tune_report``: how a trial reports.
- ``ray_train``: trials of more than one worker on Ray Train.
- ``local_ray``: a Ray of the workbench's own on this machine.
- ``tracking``: the MLflow store, written by the driver only; ``records``: what it records beside the
  metrics (the libraries' versions, each trial's corpus as its input, the study page's figures).
- ``driver``: the driver's hold on a study: ``lease`` (one driver per study) and ``stops``.
- ``live_view``: what ``wb run`` shows while trials run; ``summary``: the lines it ends with.
"""
