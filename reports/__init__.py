"""reports: the record format and its renderers (terminal, Markdown, HTML), compare and gate.

Records are produced by superopt (superopt/store/record.py) as JSON; this package reads them and
knows nothing of how they were made.
"""
from reports.load import RecordError, load_record, load_records

__all__ = ["RecordError", "load_record", "load_records"]
