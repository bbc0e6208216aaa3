"""`python -m longctx_eval.cli ...` runs the command line."""

import sys

from longctx_eval.cli import main

sys.exit(main())
