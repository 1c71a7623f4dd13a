"""MkDocs hook: links from a page to a repository file outside docs/ (``../examples/llm/README.md``).

MkDocs only knows the files under docs/, so it reports every such link as "not found", which
``--strict`` turns into a failure. This hook drops that report when the link's target exists in the
repository (site/ sits beside docs/ and ``use_directory_urls`` is off, so the relative link still
opens the file from a local checkout) and keeps it, failing the strict build, when it does not.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

NOT_FOUND = re.compile(r"Doc file '(?P<page>[^']+)' contains a link '(?P<url>[^']+)', but the target")


class RepositoryFileLinks(logging.Filter):
    """Lets through every record but a "not found" for a link to an existing file outside docs/."""

    def __init__(self, docs_dir: Path) -> None:
        super().__init__()
        self.docs_dir = docs_dir.resolve()
        self.repo = self.docs_dir.parent

    def filter(self, record: logging.LogRecord) -> bool:
        found = NOT_FOUND.match(record.getMessage())
        if found is None:
            return True
        page = self.docs_dir / found["page"]
        target = (page.parent / unquote(urlsplit(found["url"]).path)).resolve()
        outside_docs = target.is_relative_to(self.repo) and not target.is_relative_to(self.docs_dir)
        return not (outside_docs and target.exists())


def on_config(config: Any) -> Any:
    logger = logging.getLogger("mkdocs.structure.pages")
    for old in [f for f in logger.filters if isinstance(f, RepositoryFileLinks)]:
        logger.removeFilter(old)  # `mkdocs serve` rebuilds with the hook loaded again
    logger.addFilter(RepositoryFileLinks(Path(config["docs_dir"])))
    return config
