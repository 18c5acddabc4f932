"""The dataflow API: ``Worker`` (its ``new_collection``), ``Collection`` and ``Arranged``,
loops (``Variable``, ``iterate``) and composites built from operators (``antijoin``, the
hierarchical reduce for skewed keys)."""
