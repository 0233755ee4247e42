"""Code that runs as the Spark driver of an indexing task."""
