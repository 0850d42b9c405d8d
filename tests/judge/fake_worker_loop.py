"""The request loop the GPU worker stand-ins of tests/judge share (run as scripts: this module
sits beside them on ``sys.path``): say hello, then hand over each request; end the process at
the parent's EOF or ``exit``; answer ``log`` with the stand-in's log when it keeps one."""
import sys

from superopt.judge.backends import _proto


def requests(info: dict, log: list | None = None):
    """Send the hello with ``info``, then yield every request the stand-in must answer itself."""
    _proto.send(1, {"ok": True, "info": info})
    while True:
        try:
            req = _proto.recv(0)
        except _proto.ProtocolEOF:
            sys.exit(0)
        if req.get("op") == "exit":
            sys.exit(0)
        if log is not None and req.get("op") == "log":
            _proto.send(1, {"log": log})
            continue
        yield req
