"""dmlqa: a cited question-answering knowledge base over the distributed-ML literature.

The library API is :class:`KnowledgeBase` (see :mod:`dmlqa.api`); the CLI and the chat app are
front ends over the same functions.
"""

from dmlqa.api import KnowledgeBase  # noqa: E402
from dmlqa.errors import DmlqaError  # noqa: E402
from dmlqa.models import Answer, Citation, Document, Hit, Resource  # noqa: E402
from dmlqa.version import __version__  # noqa: E402

__all__ = ["Answer", "Citation", "DmlqaError", "Document", "Hit", "KnowledgeBase", "Resource", "__version__"]
