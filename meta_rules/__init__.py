"""Scan-aware MetaSchedule schedule rules (issue 3: not written yet)."""
