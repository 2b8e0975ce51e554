"""The Chroma side of a store: the client, the collection (opened, called, read a page
at a time, searched for nearest neighbours, its writes counted) and its namespaces'
partition, the namespace registry, the writer that writes to the collection and then
the keyword index (and reports the stored memories a new one nearly repeats), and the
sync that keeps the index in step with the collection.

May import: ``_model``, ``_process``, ``_embedding``, ``_keyword``, ``_shared_path``.
"""
