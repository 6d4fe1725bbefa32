"""Persistence: Lance tables, the FAISS index, their origin record and consistency."""
