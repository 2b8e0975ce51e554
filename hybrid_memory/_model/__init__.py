"""The model: what a memory is and the words every other part speaks.

Errors, settings, the public result types, a memory's stored form and its conversions,
what a write did, the filter grammar, tag and namespace names, times, and the checks on
what a caller passes. Pure values and functions: no I/O, no threads.

May import: nothing else of hybrid_memory.
"""
