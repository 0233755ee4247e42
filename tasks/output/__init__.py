"""What a task writes: persists merged into segments in deep storage."""
