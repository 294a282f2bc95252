"""``python -m foxwb.workbench.cli``: the ``wb`` command."""
import sys

from foxwb.workbench.cli.main import main

sys.exit(main())
