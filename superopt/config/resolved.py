"""The settings of one run, resolved once from :data:`superopt.config.settings.SETTINGS`.

Why one object: the optimizer used to carry the parsed ``nvcc-plus.toml`` as a raw dict into
the store, the specs, the cluster and the search, and each read the environment again and
applied flag > env > toml by hand. A :class:`Settings` is made once per run (the driver's
compilation, a ``superopt`` command) from the flags, the environment and the document, is
frozen, and is what every phase below the pipeline reads.

Settings that have neither a toml key nor a flag (the emulator's caps, the GPUs, tool paths)
are read where they are used with :func:`superopt.config.settings.env_value` /
:func:`~superopt.config.settings.env_number`: the same table, the same validation.
"""
from __future__ import annotations

import os
from types import MappingProxyType
from typing import Mapping

from superopt.config.settings import BY_ENV, SETTINGS, SettingError, did_you_mean, parse_number, resolve

__all__ = ["Settings", "SettingError", "RUN_KEYS"]

# Keys of the optimizer's config dict that are not settings but the run's own (the driver's
# soft deadline, a progress observer, command-line overrides, the preprocessed unit's path, the
# restrict-compiled variant of the unit: superopt.api.optimize_ptx).
RUN_KEYS = ("deadline", "progress", "overrides", "preprocessed", "restrict_variant")


class Settings:
    """Every setting of the table resolved for one run: ``flags`` (by toml key: a ``superopt``
    command's options, the driver's ``--plus-*`` flags) > environment > ``document`` (the
    parsed nvcc-plus.toml) > default. Immutable once made."""

    __slots__ = ("_values", "_origins", "document", "config_path", "_frozen")

    def __init__(self, document: Mapping | None = None, *, flags: Mapping | None = None,
                 env: Mapping | None = None, config_path: str | None = None):
        doc = {k: v for k, v in dict(document or {}).items() if k not in RUN_KEYS}
        path = config_path or doc.get("config_path")
        if path:
            doc["config_path"] = str(path)
        env = os.environ if env is None else env
        values, origins = {}, {}
        for s in SETTINGS:
            values[s.env], origins[s.env] = resolve(s.env, config=doc, env=env, flags=dict(flags or {}))
        object.__setattr__(self, "_values", MappingProxyType(values))
        object.__setattr__(self, "_origins", MappingProxyType(origins))
        #: the nvcc-plus.toml document (with ``config_path``), read only: the ``[kernels]``
        #: tables are launch specs (superopt.specs), not settings
        object.__setattr__(self, "document", MappingProxyType(doc))
        object.__setattr__(self, "config_path", str(path) if path else None)
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name, value):
        raise AttributeError("Settings are frozen: make a new one (Settings(..., flags=...))")

    @classmethod
    def from_config(cls, config: "Settings | Mapping | None", *, env: Mapping | None = None) -> "Settings":
        """The settings of the optimizer's ``config``: a Settings as is, or the dict the driver
        and the commands hand over (the toml document, ``overrides``: flags by toml key,
        ``config_path``; the run's own keys are ignored here)."""
        if isinstance(config, Settings):
            return config
        cfg = dict(config or {})
        flags = dict(cfg.get("overrides") or {})
        if "verbose" in cfg and flags.get("verbose") is None:
            flags["verbose"] = cfg["verbose"]          # the driver's resolved value (flag > env > toml)
        return cls(cfg, flags=flags, env=env)

    # ---- reading ---------------------------------------------------------------------
    def raw(self, env_name: str):
        """The value as given (a string from the environment, any TOML value, a flag's value),
        or None for the default."""
        return self._values[env_name]

    def origin(self, env_name: str) -> str:
        """Where the value came from: ``--flag``, ``env NAME``, the toml file's path, ``default``."""
        return self._origins[env_name]

    def text(self, env_name: str, default: str | None = None) -> str | None:
        v = self._values[env_name]
        return default if v is None or str(v).strip() == "" else str(v).strip()

    def flag(self, env_name: str) -> bool:
        v = self._values[env_name]
        if isinstance(v, bool):
            return v
        return v is not None and str(v).strip().lower() in ("1", "true", "yes", "on")

    def choice(self, env_name: str, choices: tuple[str, ...], default: str) -> str:
        v = self.text(env_name, default)
        if v not in choices:
            raise self.error(env_name, f"must be one of {', '.join(choices)}", did_you_mean(v, choices))
        return v

    def number(self, env_name: str, default=None, *, minimum: float | None = None, integer: bool = False):
        v = self._values[env_name]
        if v is None or (isinstance(v, str) and not v.strip()):
            return default
        return parse_number(self.label(env_name), v, origin=self.origin(env_name), minimum=minimum,
                            integer=integer)

    def names(self, env_name: str) -> list[str] | None:
        """A list setting (a TOML list, or comma-separated text), or None when unset."""
        v = self._values[env_name]
        if v is None:
            return None
        items = v if isinstance(v, (list, tuple)) else str(v).split(",")
        return [str(i).strip() for i in items if str(i).strip()]

    def label(self, env_name: str) -> str:
        """How a message names a setting: its toml key and variable."""
        s = BY_ENV[env_name]
        return f"{s.toml} ({s.env})" if s.toml else s.env

    def error(self, env_name: str, what: str, hint: str = "") -> SettingError:
        v = self._values[env_name]
        origin = self.origin(env_name)
        return SettingError(f"{self.label(env_name)} {what}, not {v!r}"
                            + (f" (from {origin})" if origin != "default" else "") + hint)

    def spec_document(self) -> dict:
        """The document as launch-spec readers take it (superopt.specs.inference.explicit_specs)."""
        return dict(self.document)

    def __repr__(self) -> str:
        given = {k: v for k, v in self._values.items() if v is not None}
        return f"Settings({given!r}, config_path={self.config_path!r})"
