"""Index stage: chunk, embed (with a vector cache), and write immutable index versions
(FAISS + BM25 + document and sentence stores) that readers open by name.
"""
