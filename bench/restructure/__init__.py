"""bench/restructure: naive programs whose loops walk memory badly (issue 27)."""
