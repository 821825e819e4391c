"""``python -m pmewald.bench <subcommand> [options]``: see :mod:`pmewald.bench`."""

import sys

from . import main

sys.exit(main())
