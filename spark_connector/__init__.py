"""PySpark data source ``logbroker``: batch and streaming reads over segments, and a sink."""
