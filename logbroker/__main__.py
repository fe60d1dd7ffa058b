"""``python -m logbroker`` is the ``logbroker`` command."""

import sys

from logbroker.cli.command import main

sys.exit(main())
