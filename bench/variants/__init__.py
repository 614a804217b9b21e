"""One module per benchmarked system; each runs as its own process and prints one JSON
line: ``rows_in``, ``query_seconds``, ``batches`` (where it has them) and where its
output is (``output``, ``format``)."""
