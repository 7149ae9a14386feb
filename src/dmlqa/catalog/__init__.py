"""Catalog stage: parse curated lists into resources, keep the catalog, take in local documents.

The first stage; it imports nothing of the stages after it.
"""
