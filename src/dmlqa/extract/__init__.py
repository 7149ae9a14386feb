"""Extract stage: turn fetched bytes (HTML, PDF, text) into documents with pages, facts and sentences.
"""
