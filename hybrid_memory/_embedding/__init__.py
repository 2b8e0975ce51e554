"""Embedding: one interface over what a caller passes (LangChain, LlamaIndex, Chroma, a
callable), and the default model (all-MiniLM-L6-v2 on onnxruntime) with its files.

May import: ``_model``, ``_process``.
"""
