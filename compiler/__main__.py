"""``python -m compiler``: see :mod:`compiler.cli`."""

import sys

from .cli import main

sys.exit(main())
