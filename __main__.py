"""Pulumi entry point; everything lives in trainer_infra (see README)."""

import sys

from trainer_infra.core.errors import ConfigError
from trainer_infra.program import run

try:
    run()
except ConfigError as exc:
    # A config mistake is the user's to fix: print it plainly, no traceback.
    print(exc.render(), file=sys.stderr)
    sys.exit(2)
