"""`python3 -m manypy.client ...` is `manypy-client ...`."""
import sys

from .cli import main

sys.exit(main())
