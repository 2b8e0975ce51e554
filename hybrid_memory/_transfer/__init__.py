"""Export and import: the JSON Lines format and the transfer between a store and a file.

May import: ``_memory`` and what it may import.
"""
