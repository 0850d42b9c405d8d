"""Making candidates and choosing among them: candidates, the Proposer interface, the rule
proposer, and the one search loop (loop.py) that asks proposers, judges, chooses and confirms."""
