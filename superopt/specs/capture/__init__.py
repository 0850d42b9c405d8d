"""``superopt capture``: record how a real program launches its kernels.

* :mod:`.build` — builds the CUPTI injection library (``inject.c``) at first use.
* :mod:`.runner` — :func:`run_capture` runs a program under it and writes the capture.
* :mod:`.format` — raw lines -> aggregated capture, :func:`load_capture`, :func:`kernel_share`.
* :mod:`.specs` — :func:`specs_from_capture`: a captured kernel's LaunchSpecs (origin "captured").
* :mod:`.cli` — the click command ``capture_command``.

The names are loaded on first use (PEP 562): reading a capture's format does not load the spec
machinery (numpy) that turning it into launch specs needs.
"""
from __future__ import annotations

import importlib

_HOMES = {
    **dict.fromkeys(("CaptureBuildError", "build_library", "find_toolkit"), "build"),
    **dict.fromkeys(("FORMAT", "VERSION", "CaptureError", "aggregate", "is_minor", "kernel_share", "load_capture",
                     "minor_kernels", "read_raw", "validate_capture", "write_capture"), "format"),
    **dict.fromkeys(("DEFAULT_CAP", "DEFAULT_OUT", "run_capture"), "runner"),
    **dict.fromkeys(("CaptureSpecError", "CapturedSpecs", "captured_specs", "specs_from_capture"), "specs"),
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'superopt.specs.capture' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
