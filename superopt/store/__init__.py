"""What the search decided, kept: the decision cache, the lockfile, and per-kernel records."""
