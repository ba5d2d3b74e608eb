"""Which jobs an input holds: spans per job id, so that runs mixed in one file are named, not merged
silently (spec/analysis.md §5.5).

Each span names its job where its process was launched as one (``tempotrace.job_id`` and
``tempotrace.restart`` on the Resource, else on the span; semantic-conventions §9.1). Re-running a job in
the same folder used to append to one export file, and the analysis drew both runs as one timeline.
The count is per (job id, restart); the report gives one row per job id with its restarts. Bounded: at most
``MAX_JOBS`` keys are told apart (a hostile input cannot make the table grow), the rest are counted together.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .events import JobKey

__all__ = ["MAX_JOBS", "MAX_RESTARTS", "JobSpans"]

#: Distinct (job id, restart) keys counted apart; spans of further keys are counted in ``other``.
MAX_JOBS = 1024
#: Restarts listed per job id in the JSON (elastic jobs restart a handful of times).
MAX_RESTARTS = 64


@dataclass
class JobSpans:
    """Spans per job key (None: spans that name no job), as analysed (duplicates counted once)."""

    spans: Counter[JobKey | None] = field(default_factory=Counter)
    #: spans of job keys beyond MAX_JOBS
    other: int = 0

    def merge_counts(self, counts: Counter[JobKey | None]) -> None:
        """Add spans counted per key (one trace part's, one partition's)."""
        spans = self.spans
        for key, n in counts.items():
            if key in spans or len(spans) < MAX_JOBS:
                spans[key] += n
            else:
                self.other += n

    def merge(self, other: JobSpans) -> None:
        self.merge_counts(other.spans)
        self.other += other.other

    def job_ids(self) -> list[str]:
        """The job ids the spans name, most spans first (then by id)."""
        per: Counter[str] = Counter()
        for key, n in self.spans.items():
            if key is not None:
                per[key[0]] += n
        return [job for job, _ in sorted(per.items(), key=lambda jn: (-jn[1], jn[0]))]

    def to_list(self) -> list[dict[str, Any]]:
        """One row per job id (null: spans naming none): its restarts and its spans, most spans first."""
        rows: dict[str | None, dict[str, Any]] = {}
        for key, n in self.spans.items():
            job_id = None if key is None else key[0]
            row = rows.setdefault(job_id, {"job_id": job_id, "restarts": [], "spans": 0})
            row["spans"] += n
            if key is not None:
                row["restarts"].append(key[1])
        for row in rows.values():
            row["restarts"] = sorted(row["restarts"])[:MAX_RESTARTS]
        return sorted(rows.values(), key=lambda r: (-r["spans"], r["job_id"] is None, r["job_id"] or ""))
