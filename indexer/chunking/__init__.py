"""Chunking: a Document cut into token windows at paragraph, sentence or word boundaries, and late chunking's windows."""
