"""The model proposer: a language model proposes rewrites; the judge decides.

Two ways to ask (both give ordinary :class:`superopt.search.candidates.Candidate` objects):

* **plan mode** -- the model answers a JSON plan of pass applications, constrained by a
  schema generated from the registered passes (:mod:`superopt.model.schema`);
* **rewrite mode** -- the model writes the kernel's body again, constrained by the PTX
  grammar kept in ``ptx.ebnf`` with the kernel's header pinned (:mod:`superopt.model.grammar`).

Backends: a vLLM server (:mod:`superopt.model.client`) or transformers in process
(:mod:`superopt.model.local`). The proposer (a :class:`superopt.search.proposer.Proposer` that the
one search loop asks after the rule passes), its repair rounds and records are in
:mod:`superopt.model.proposer`; ``superopt dataset export`` in :mod:`superopt.model.dataset`.

Importing this package imports neither torch nor transformers; with no model configured
(``NVCC_PLUS_LLM_URL`` / ``NVCC_PLUS_LLM_LOCAL`` unset) nothing changes: rules only.
"""
from superopt.model.base import (TEST_MODEL, Completion, Constraint, ModelBackend, ModelConfig, ModelError,
                                 make_backend)

__all__ = ["TEST_MODEL", "Completion", "Constraint", "ModelBackend", "ModelConfig", "ModelError",
           "make_backend"]
