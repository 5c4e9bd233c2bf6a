"""`python -m tile_mlir` is tile-opt (where the console script is not installed)."""

import sys

from tile_mlir.tools.tile_opt import main

sys.exit(main())
