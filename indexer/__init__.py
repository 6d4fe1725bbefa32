"""Everything between a file and its vectors: scanning, reading, chunking, encoding, indexing."""
