"""Task runners: how the overlord starts, watches and kills indexing task processes."""
