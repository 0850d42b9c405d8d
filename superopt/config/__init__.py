"""Settings: the one table of every setting (:mod:`.settings`), the frozen object a run
resolves from it once (:mod:`.resolved`), and ``superopt config`` (:mod:`.cli`).

Nothing here is imported at package load beyond this docstring: the driver reads the table on
every compilation and must stay light."""
