import sys

from trainer_infra.cli import main

sys.exit(main())
