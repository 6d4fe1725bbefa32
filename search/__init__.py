"""Query-time logic: query encoding, retrieval, grouping chunks into ranked documents."""
