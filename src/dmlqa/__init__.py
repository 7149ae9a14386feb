"""dmlqa: a cited question-answering knowledge base over the distributed-ML literature."""

__version__ = "0.1.0"
