"""One export file per job: the default file is named after the job, and no file of another job is appended to
(spec/reliability.md §4, "One file per job"; spec/configuration.md).

Re-running a job in the same folder used to append the second run's spans to the first one's
``tempotrace-spans.jsonl``, and the analysis drew both as one timeline. So:

- under a launcher that names its job (``TEMPOTRACE_JOB_ID``, else torchrun's ``TORCHELASTIC_RUN_ID``:
  a fresh id per ``torchrun`` unless ``--rdzv-id`` fixes one), the default file is
  ``tempotrace-spans-<job>.jsonl``; every rank of the job names it alike and appends to it;
- an export file that already holds lines is read once, when it is opened: when its first line names
  another job (``tempotrace.job_id`` on its Resource, else on its first span), this process writes
  ``<name>-<job>.jsonl`` beside it instead, and logs which. A file of the same job, of no named job, or
  one that cannot be read, is appended to as before (the ranks of one job share an explicit path).

Pure file reading; never raises into the exporter (an unreadable file is "names no job").
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from typing import Any

__all__ = ["DEFAULT_STEM", "FIRST_LINE_MAX", "default_path", "file_job", "for_job", "safe_name"]

_log = logging.getLogger(__name__)

#: The default export file, without its extension (export.DEFAULT_EXPORT_PATH is this plus ".jsonl").
DEFAULT_STEM = "tempotrace-spans"
#: The most of an existing file's first line read to find its job: one export batch (512 spans of about
#: 1 KB each) with room to spare. A longer first line is not read: the file names no job we can tell.
FIRST_LINE_MAX = 4 << 20
#: The longest job id used as it is in a file name (a torchrun run id is a 36-character UUID).
_NAME_MAX = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_JOB_ID = "tempotrace.job_id"  # semconv.JOB_ID, without importing the conventions module here


def safe_name(job: str) -> str:
    """``job`` as part of a file name: characters other than letters, digits, ``.``, ``_`` and ``-`` become
    ``_``, no leading dot; an id that had to change or is too long gets 8 hex digits of its hash, so two
    jobs never share a name by being cut or cleaned alike."""
    clean = _UNSAFE.sub("_", job).lstrip(".") or "_"
    if clean == job and len(job) <= _NAME_MAX:
        return job
    digest = hashlib.blake2b(job.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{clean[:_NAME_MAX - 9]}-{digest}"


def default_path(job: str | None) -> str:
    """The export file when nothing else is configured: one per job where the launcher names one."""
    return f"{DEFAULT_STEM}.jsonl" if job is None else f"{DEFAULT_STEM}-{safe_name(job)}.jsonl"


def _job_in(attributes: Any) -> str | None:
    if not isinstance(attributes, list):
        return None
    for kv in attributes:
        if isinstance(kv, dict) and kv.get("key") == _JOB_ID:
            value = kv.get("value")
            found = value.get("stringValue") if isinstance(value, dict) else None
            return found if isinstance(found, str) else None
    return None


def file_job(path: str) -> str | None:
    """The job the first line of the file at ``path`` names; None when the file is missing, empty, unreadable,
    not OTLP JSON, or names no job."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(FIRST_LINE_MAX)
        doc = json.loads(first)
        resource_spans = doc["resourceSpans"][0]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(resource_spans, dict):
        return None
    resource = resource_spans.get("resource")
    job = _job_in(resource.get("attributes")) if isinstance(resource, dict) else None
    if job is not None:
        return job
    try:  # launch facts written on each span (a provider configure() did not create)
        return _job_in(resource_spans["scopeSpans"][0]["spans"][0]["attributes"])
    except (KeyError, IndexError, TypeError):
        return None


def for_job(path: str, job: str | None) -> str:
    """The file this process of ``job`` appends to: ``path``, unless that file holds another job's lines;
    then ``<name>-<job><ext>`` beside it (logged)."""
    if job is None:
        return path
    other = file_job(path)
    if other is None or other == job:
        return path
    stem, ext = os.path.splitext(path)
    mine = f"{stem}-{safe_name(job)}{ext or '.jsonl'}"
    _log.warning("tempotrace: %s holds the spans of job %r; this job (%r) writes %s instead, so runs do not mix",
                 path, other, job, mine)
    return mine
