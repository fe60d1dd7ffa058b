"""``python -m logbroker`` is the ``logbroker`` command."""

import sys

from logbroker.cli import main

sys.exit(main())
