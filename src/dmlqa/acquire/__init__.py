"""Acquire stage: download what the catalog names (guarded HTTP, robots, resolvers) and keep
every response in a WARC archive that a build can replay offline.
"""
