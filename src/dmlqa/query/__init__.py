"""Query side: hybrid search, reranking, cited answers (extractive or LLM), related papers,
BibTeX and evaluation, all over a published index version.
"""
