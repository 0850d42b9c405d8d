"""``superopt capture``: record how a real program launches its kernels.

* :mod:`.build` — builds the CUPTI injection library (``inject.c``) at first use.
* :mod:`.runner` — :func:`run_capture` runs a program under it and writes the capture.
* :mod:`.format` — raw lines -> aggregated capture, :func:`load_capture`, :func:`kernel_share`.
* :mod:`.specs` — :func:`specs_from_capture`: a captured kernel's LaunchSpecs (origin "captured").
* :mod:`.cli` — the click command ``capture_command``.
"""
from .build import CaptureBuildError, build_library, find_toolkit
from .format import (FORMAT, VERSION, CaptureError, aggregate, is_minor, kernel_share,
                     load_capture, minor_kernels, read_raw, validate_capture, write_capture)
from .runner import DEFAULT_CAP, DEFAULT_OUT, run_capture
from .specs import CaptureSpecError, CapturedSpecs, captured_specs, specs_from_capture

__all__ = ["CaptureBuildError", "build_library", "find_toolkit", "FORMAT", "VERSION", "CaptureError",
           "aggregate", "is_minor", "kernel_share", "load_capture", "minor_kernels", "read_raw",
           "validate_capture", "write_capture", "DEFAULT_CAP", "DEFAULT_OUT", "run_capture",
           "CaptureSpecError", "CapturedSpecs", "captured_specs", "specs_from_capture"]
