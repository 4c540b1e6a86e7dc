"""Scan-aware MetaSchedule postprocessors (issue 3: not written yet)."""
