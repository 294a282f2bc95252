"""The ``wb`` command line: ``main`` (the parser, info, train, run, dashboard) and ``reports``
(status, results, the dry run)."""
