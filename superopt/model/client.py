"""The vLLM server backend: an OpenAI-compatible ``/v1/chat/completions`` client.

Plain ``urllib`` (a dozen lines of HTTP do not justify a dependency). Structured output
uses vLLM's current request field ``structured_outputs`` -- ``{"json": schema}`` in plan
mode, ``{"grammar": EBNF}`` in rewrite mode -- which the ``openai`` package would send as
``extra_body``. The ``guided_*`` fields were removed in vLLM 0.12 and newer servers
silently ignore them, so they are never sent. Best-of-N is ``n``; ``seed`` makes samples
reproducible; a choice whose ``finish_reason`` is ``length`` was cut off and is reported
as such (the proposer counts it a failure, never parses half a kernel).
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from superopt.model.base import Completion, Constraint, ModelError

FORBIDDEN_FIELDS = ("guided_json", "guided_grammar", "guided_regex", "guided_choice",
                    "guided_decoding_backend", "guided_whitespace_pattern")


def api_base(url: str) -> str:
    """``http://host:8000``, ``http://host:8000/`` or ``http://host:8000/v1`` -> ``.../v1``."""
    url = url.rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url if url.endswith("/v1") else url + "/v1"


class ServerBackend:
    kind = "server"

    def __init__(self, url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout: float = 600.0):
        self.base = api_base(url)
        self._model = model
        self.api_key = api_key
        self.timeout = timeout

    # ------------------------------------------------------------------ HTTP
    def _request(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> dict:
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            bad = [k for k in FORBIDDEN_FIELDS if k in body]
            if bad:    # a guard against regressions: these are silently ignored by vLLM >= 0.12
                raise ModelError(f"refusing to send removed vLLM fields {bad}")
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            try:
                doc = json.loads(detail)
                detail = doc.get("error", {}).get("message") if isinstance(doc.get("error"), dict) \
                    else doc.get("message") or doc.get("detail") or detail
            except (json.JSONDecodeError, AttributeError):
                pass
            raise ModelError(f"{self.base}{path}: HTTP {e.code}: {str(detail)[:500]}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ModelError(f"cannot reach the model server at {self.base} ({reason})") from None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ModelError(f"{self.base}{path}: the answer is not JSON: {raw[:200]!r}") from None

    def models(self) -> list[str]:
        doc = self._request("GET", "/models", timeout=min(self.timeout, 30))
        return [m.get("id") for m in doc.get("data", []) if m.get("id")]

    @property
    def model(self) -> str:
        if self._model is None:
            names = self.models()
            if not names:
                raise ModelError(f"the server at {self.base} serves no model")
            self._model = names[0]
        return self._model

    def describe(self) -> dict:
        try:
            model = self.model
        except ModelError:
            model = self._model
        return {"backend": "server", "url": self.base, "model": model}

    # ------------------------------------------------------------------ completions
    def request_body(self, messages: list[dict], *, constraint: Constraint, n: int = 1,
                     max_tokens: int = 512, temperature: float = 0.7, seed: int | None = None) -> dict:
        body = {
            "model": self.model,
            "messages": messages,
            "n": int(n),
            "max_tokens": int(max_tokens),
            "temperature": float(temperature),
            "structured_outputs": constraint.structured_outputs(),
        }
        if seed is not None:
            body["seed"] = int(seed)
        return body

    def complete(self, messages: list[dict], *, constraint: Constraint, n: int = 1, max_tokens: int = 512,
                 temperature: float = 0.7, seed: int | None = None) -> list[Completion]:
        body = self.request_body(messages, constraint=constraint, n=n, max_tokens=max_tokens,
                                 temperature=temperature, seed=seed)
        t0 = time.monotonic()
        doc = self._request("POST", "/chat/completions", body)
        elapsed = time.monotonic() - t0
        choices = doc.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ModelError(f"{self.base}: no choices in the answer: {json.dumps(doc)[:300]}")
        out = []
        usage = doc.get("usage") or {}
        per = (usage.get("completion_tokens") // len(choices)) if usage.get("completion_tokens") else None
        for i, ch in enumerate(sorted(choices, key=lambda c: c.get("index", 0))):
            msg = ch.get("message") or {}
            text = msg.get("content")
            if text is None:
                text = ch.get("text") or ""
            out.append(Completion(text=text, finish_reason=ch.get("finish_reason") or "unknown",
                                  index=ch.get("index", i), tokens=per, seconds=elapsed))
        return out
