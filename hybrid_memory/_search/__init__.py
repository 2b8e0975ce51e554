"""Search: the searcher that asks each leg, fuses them and reads the hits, with its pure
math (fusion, relevance, recency, feedback), supersession's demotion, the token budget,
and the time scope read from a question.

May import: ``_model``, ``_process``, ``_embedding``, ``_keyword``, ``_store``.
"""
