"""``python -m kvcontract``: the ``kvcontract`` command."""

import sys

from kvcontract.cli import main

sys.exit(main())
