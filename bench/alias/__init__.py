"""bench/alias: naive linear-algebra programs for no-alias versioning (issue 26)."""
