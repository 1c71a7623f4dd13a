"""``python -m model_archiver``: the same as the ``torch-model-archiver`` command."""

import sys

from .model_packaging import main

sys.exit(main())
