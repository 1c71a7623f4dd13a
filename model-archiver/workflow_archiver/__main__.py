"""``python -m workflow_archiver``: the same as the ``torch-workflow-archiver`` command."""

import sys

from .workflow_packaging import main

sys.exit(main())
