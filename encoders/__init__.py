"""Encoders: texts to vectors (PyTorch, ONNX Runtime fast paths and their fidelity gate, layer streaming for models larger than memory, the query encoder), and what a model directory declares."""
