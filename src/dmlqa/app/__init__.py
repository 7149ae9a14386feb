"""Front ends: the command line and the chat app, thin over :class:`dmlqa.KnowledgeBase`.
"""
