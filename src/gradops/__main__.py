"""``python -m gradops``: the ``gradops`` command line (:mod:`gradops.cli`)."""

import sys

from .cli import main

sys.exit(main())
