"""Making candidates and choosing among them: candidates, rule proposals, the search loop."""
