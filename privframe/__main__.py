"""``python -m privframe``: the same command line as the ``privframe`` script."""

import sys

from privframe.api.cli import main

sys.exit(main())
