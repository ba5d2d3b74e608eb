"""The value rules: every ``tempotrace.*`` attribute the analysis knows, its type and its range, in one
table, and the span-record builder every reader uses (spec/analysis.md §5, spec/semantic-conventions.md).

Two attribute sets are read: the current one (``tempotrace.stamps``, decoded by stamptext.py, beside the
queryable ``clk_quality`` and ``uncertainty_ns``; host and clock on the span or its Resource) and the
previous one (one attribute per field, semantic-conventions §1.5), which older exports hold. A span with
a stamps text is read from it; the previous set's attributes are still checked by their rules.

Two readers feed it: the OTLP JSON reader (otlp.py: values arrive wrapped,
``{"intValue": ...}``) and in-memory OpenTelemetry spans
(api.records_from_readable: plain Python values). Both go through a ``Schema``
built from the table: ``read_otlp`` / ``read_plain`` check each known
attribute and put its value in a slot, ``build_record`` makes the SpanRecord
from the slots (the machinery: schema.py). So a value is refused for the same reason whichever way it
came.

Adding an attribute: one row in ``SPAN_RULES`` (with ``read=False`` when the
analysis only checks it); for one the record uses, also its name in ``READ``
and one line in ``build_record``. ``tempotrace.*`` names not in the table are
future attributes: accepted and ignored.

A broken rule raises ``AttributeRuleError`` naming the attribute and the rule.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from .. import semconv as S
from ..errors import StampsError
from ..stamptext import SpanStamps
from ..stamptext import decode as decode_stamps
from ..wire.layout import TENANT_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource
from .clockdomain import Domain, domain_of
from .events import NO_STAMP, QUALITIES, DumpInfo, JobKey, Sends, SpanRecord, Stamp, TorchOp, clock_id
from .groupkey import GROUP_KEY_PATTERN, MAX_GROUP, MAX_RANK, parse_key
from .order import own_mask
from .schema import BOOL, HEX, INT, INT64_MAX, INT_ARRAY, STRING, AttributeRuleError, Rule, Schema
from .stampsread import Slots, thread_reader

__all__ = [
    "COMPLETIONS", "EXPORT_DROPPED_SPANS", "EXPORT_WRITER_ID", "READ", "RESOURCE", "SPAN", "SPAN_RULES",
    "AttributeRuleError", "Rule", "Schema", "build_record", "norm_id", "span_kind", "torch_op", "unix_nanos",
]

#: OTLP span times are fixed64 nanoseconds.
FIXED64_MAX = 2**64 - 1

#: Resource attributes of an exporter's loss record (spec/analysis.md §5.4): cumulative spans dropped by
#: one exporter instance, and that instance's id. Written by the SDK's exporter on a line with no spans.
EXPORT_DROPPED_SPANS = "tempotrace.export.dropped_spans"
EXPORT_WRITER_ID = "tempotrace.export.writer_id"

POLICY_VERDICTS = ("pass", "flag", "suspend_alerting", "degrade")


_TAI_NS = Rule(INT)  # ns since 1970 TAI, 0..2^63-1
_UNCERTAINTY = Rule(INT, 0, UNCERTAINTY_SATURATED)
_LAMPORT = Rule(INT)
_QUALITY = Rule(STRING, choices=frozenset(QUALITIES))
_SOURCE = Rule(STRING, choices=frozenset(v.name for v in TsSource), read=False)
_TENANT = Rule(INT, 0, TENANT_MAX, read=False)
_SKETCH = Rule(HEX, digits=64)
_NAME = Rule(STRING)
assert set(QUALITIES) == {v.name for v in ClockQuality}
_RANK = Rule(INT, 0, MAX_RANK)
_COUNT = Rule(INT, read=False)
_CHECKED_RANK = Rule(INT, 0, MAX_RANK, read=False)
#: the launch's job (semantic-conventions §9.1): on the Resource, else on each span; read for the report's jobs
_JOB_ID = Rule(STRING)
_RESTART = Rule(INT)
#: how a torch op's end was seen (spec/torch.md §1.3)
COMPLETIONS = S.TORCH_COMPLETIONS  # the SDK's own list: a value it writes is never refused

#: torch.distributed spans (spec/semantic-conventions.md §9): launch facts, op spans, carried records, the
#: clock check, GPU timing. One row per attribute, like the rows above.
TORCH_RULES: dict[str, Rule] = {
    S.WORLD_SIZE: Rule(INT, 1, MAX_RANK + 1, read=False), S.LOCAL_RANK: _CHECKED_RANK, S.NODE_RANK: _CHECKED_RANK,
    S.JOB_ID: _JOB_ID, S.RESTART: _RESTART,
    S.TORCH_OP: _NAME, S.TORCH_GROUP: Rule(STRING, pattern=GROUP_KEY_PATTERN, shape="a group key (a, a-b, a-b:s "
                                             "runs joined by ',', then optionally '#name'; spec/torch.md §2)"),
    S.TORCH_GROUP_RANK: Rule(INT, 0, MAX_GROUP - 1), S.TORCH_GROUP_SIZE: Rule(INT, 1, MAX_GROUP),
    S.TORCH_BACKEND: Rule(STRING, read=False), S.TORCH_ROOT: _RANK, S.TORCH_BYTES: _COUNT, S.TORCH_SEQ: Rule(INT),
    S.TORCH_COMPLETION: Rule(STRING, choices=frozenset(COMPLETIONS)),
    S.TORCH_PEER: Rule(INT, -1, MAX_RANK, read=False), S.TORCH_SRC: _RANK, S.TORCH_DST: Rule(INT, -1, MAX_RANK),
    S.TORCH_TAG: Rule(INT, -INT64_MAX - 1, INT64_MAX), S.TORCH_P2P_SEQ: Rule(INT), S.TORCH_P2P_AMBIGUOUS: Rule(BOOL),
    S.TORCH_BATCHED: Rule(BOOL, read=False), S.TORCH_BUCKET: _COUNT,
    S.TORCH_STEP: Rule(INT), S.TORCH_STEP_OCCURRENCE: Rule(INT),
    S.TORCH_COMPUTE: Rule(STRING, choices=frozenset(("forward", "backward", "optimizer.step")), read=False),
    S.TORCH_MODULE: Rule(STRING, read=False), S.TORCH_OPTIMIZER: Rule(STRING, read=False),
    S.TORCH_CARRIAGE: Rule(STRING, choices=frozenset(("none", "step", "step+p2p", "op")), read=False),
    S.TORCH_RECV_LTS: _LAMPORT, S.TORCH_RECV_COUNT: _COUNT, S.TORCH_RECV_MISSING: Rule(INT_ARRAY, 0, MAX_RANK),
    S.TORCH_RECV_SKETCH: _SKETCH,
    S.TORCH_REMOTE_PTP_NS: _TAI_NS, S.TORCH_REMOTE_UNCERTAINTY_NS: _UNCERTAINTY, S.TORCH_REMOTE_CLK_QUALITY: _QUALITY,
    S.TORCH_REMOTE_LTS: _LAMPORT, S.TORCH_REMOTE_SPAN_ID: Rule(HEX, digits=16),
    S.TORCH_CLOCK_REF_RANK: _CHECKED_RANK, S.TORCH_CLOCK_OFFSET_NS: Rule(INT, -INT64_MAX - 1, INT64_MAX, read=False),
    S.TORCH_CLOCK_BOUND_NS: _COUNT, S.TORCH_CLOCK_RTT_NS: _COUNT, S.TORCH_CLOCK_TIMESTAMPS: Rule(INT_ARRAY, read=False),
    S.TORCH_CLOCK_VERDICT: Rule(STRING, choices=frozenset(S.TORCH_CLOCK_VERDICTS), read=False),
    S.TORCH_CLOCK_SUSPECTS: Rule(INT_ARRAY, 0, MAX_RANK, read=False),
    S.TORCH_GPU_PTP_NS: Rule(INT, read=False), S.TORCH_GPU_END_PTP_NS: Rule(INT, read=False),
    S.TORCH_GPU_UNCERTAINTY_NS: Rule(INT, 0, UNCERTAINTY_SATURATED, read=False), S.TORCH_GPU_TS_SOURCE: _SOURCE,
    # the flight recorder's dump record (spec/torch.md §7.3; the hang report reads it, analysis/hangfacts.py)
    S.TORCH_DUMP_REASON: Rule(STRING, choices=frozenset(S.TORCH_DUMP_REASONS)), S.TORCH_DUMP_OPS: Rule(INT),
    S.TORCH_DUMP_PENDING: Rule(INT), S.TORCH_DUMP_OVERWRITTEN: Rule(INT), S.TORCH_DUMP_REQUESTED_BY: _RANK,
}

#: The host clock domain (semantic-conventions §1.2, analysis.md §2.1): per process (the Resource, else each
#: span), a span's own epoch after a step of the clock, ``stepped`` when one may lie among its readings.
_EPOCH = Rule(INT, -INT64_MAX - 1, INT64_MAX)
_NS_BOUND = Rule(INT, 0, 10**12)
DOMAIN_RULES: dict[str, Rule] = {
    S.CLOCK_DOMAIN: _NAME, S.CLOCK_EPOCH_NS: _EPOCH, S.CLOCK_EPOCH_BOUND_NS: _NS_BOUND, S.CLOCK_READ_NS: _NS_BOUND,
}

#: Every span attribute the analysis checks (spec/semantic-conventions.md §2-§7, §9). One row per attribute.
SPAN_RULES: dict[str, Rule] = {
    S.PTP_NS: _TAI_NS, S.UNCERTAINTY_NS: _UNCERTAINTY, S.CLK_QUALITY: _QUALITY, S.TS_SOURCE: _SOURCE,
    S.LTS: _LAMPORT, S.TENANT_ID: _TENANT, S.SVC_SKETCH: _SKETCH, S.CLOCK: _NAME, S.HOST: _NAME,
    S.END_PTP_NS: _TAI_NS, S.END_UNCERTAINTY_NS: _UNCERTAINTY, S.END_CLK_QUALITY: _QUALITY, S.END_LTS: _LAMPORT,
    S.REMOTE_PTP_NS: _TAI_NS, S.REMOTE_UNCERTAINTY_NS: _UNCERTAINTY, S.REMOTE_CLK_QUALITY: _QUALITY,
    S.REMOTE_TS_SOURCE: _SOURCE, S.REMOTE_LTS: _LAMPORT, S.REMOTE_TENANT_ID: _TENANT, S.REMOTE_SVC_SKETCH: _SKETCH,
    S.RECV_LTS: _LAMPORT,
    S.SEND_LTS: Rule(INT_ARRAY), S.SEND_PTP_NS: Rule(INT_ARRAY),
    S.SEND_UNCERTAINTY_NS: Rule(INT_ARRAY, 0, UNCERTAINTY_SATURATED),
    S.POLICY_VERDICT: Rule(STRING, choices=frozenset(POLICY_VERDICTS)),
    S.POLICY_REASON: Rule(STRING, max_chars=0, read=False), S.POLICY_TIER: Rule(STRING, read=False),
    S.POLICY_RETENTION_DAYS: Rule(INT, 1, 36500, read=False),
    S.CLOCK_PROFILE: _NAME, S.RANK: _RANK,
    S.STAMPS: Rule(STRING, max_chars=0),  # its own rules: stamptext.decode, in build_record
    **TORCH_RULES,
    **DOMAIN_RULES, S.CLOCK_STEPPED: Rule(BOOL),
}

#: The attributes build_record reads, in the order of its slots.
READ = (
    S.PTP_NS, S.UNCERTAINTY_NS, S.CLK_QUALITY, S.LTS, S.SVC_SKETCH, S.CLOCK, S.HOST,
    S.END_PTP_NS, S.END_UNCERTAINTY_NS, S.END_CLK_QUALITY, S.END_LTS,
    S.REMOTE_PTP_NS, S.REMOTE_UNCERTAINTY_NS, S.REMOTE_CLK_QUALITY, S.REMOTE_LTS, S.REMOTE_SVC_SKETCH, S.RECV_LTS,
    S.SEND_LTS, S.SEND_PTP_NS, S.SEND_UNCERTAINTY_NS, S.POLICY_VERDICT, S.CLOCK_PROFILE, S.RANK, S.STAMPS,
    # torch (TorchOp): built only for spans with tempotrace.torch.op
    S.TORCH_OP, S.TORCH_GROUP, S.TORCH_GROUP_RANK, S.TORCH_GROUP_SIZE, S.TORCH_SEQ, S.TORCH_ROOT, S.TORCH_COMPLETION,
    S.TORCH_SRC, S.TORCH_DST, S.TORCH_TAG, S.TORCH_P2P_SEQ, S.TORCH_RECV_LTS, S.TORCH_RECV_MISSING,
    S.TORCH_RECV_SKETCH, S.TORCH_REMOTE_PTP_NS, S.TORCH_REMOTE_UNCERTAINTY_NS, S.TORCH_REMOTE_CLK_QUALITY,
    S.TORCH_REMOTE_LTS, S.TORCH_REMOTE_SPAN_ID, S.TORCH_P2P_AMBIGUOUS,
    # the step span's number and the job (launch facts written on each span rather than on the Resource)
    S.TORCH_STEP, S.TORCH_STEP_OCCURRENCE, S.JOB_ID, S.RESTART,
    # the clock domain, when the span says it itself (no Resource carrying it, or after a step)
    S.CLOCK_DOMAIN, S.CLOCK_EPOCH_NS, S.CLOCK_EPOCH_BOUND_NS, S.CLOCK_READ_NS, S.CLOCK_STEPPED,
    # a dump record (a torch.dump span)
    S.TORCH_DUMP_REASON, S.TORCH_DUMP_OPS, S.TORCH_DUMP_PENDING, S.TORCH_DUMP_OVERWRITTEN, S.TORCH_DUMP_REQUESTED_BY,
)
#: How many of the rare slots ``torch_op`` reads (then: step, its occurrence, job id, restart; then the domain;
#: then the dump record).
_OP_SLOTS = 20
_DOMAIN_SLOTS = _OP_SLOTS + 4
_DUMP_SLOTS = _DOMAIN_SLOTS + 5

#: Resource attributes the analysis reads: the host, rank, clock and job its spans fall back on (per-process
#: attributes, semantic-conventions §1.2, §9.1), an exporter's loss record.
RESOURCE_RULES: dict[str, Rule] = {
    S.HOST: _NAME, "host.name": _NAME, S.RANK: SPAN_RULES[S.RANK],
    EXPORT_DROPPED_SPANS: Rule(INT), EXPORT_WRITER_ID: _NAME, S.CLOCK: _NAME, S.JOB_ID: _JOB_ID, S.RESTART: _RESTART,
    **DOMAIN_RULES,
}
RESOURCE_READ = (S.HOST, "host.name", S.RANK, EXPORT_DROPPED_SPANS, EXPORT_WRITER_ID, S.CLOCK, S.JOB_ID, S.RESTART,
                 S.CLOCK_DOMAIN, S.CLOCK_EPOCH_NS, S.CLOCK_EPOCH_BOUND_NS, S.CLOCK_READ_NS)

SPAN = Schema(SPAN_RULES, READ, frozenset(TORCH_RULES) | frozenset(DOMAIN_RULES) | {S.CLOCK_STEPPED})
RESOURCE = Schema(RESOURCE_RULES, RESOURCE_READ)


def norm_id(raw: str, size: int, what: str) -> str:
    """An OTLP id as lower-case hex: hex (what OTLP/JSON writes) or base64 (protobuf's JSON mapping)."""
    if len(raw) == 2 * size:
        try:
            if len(bytes.fromhex(raw)) == size:  # whitespace would make it shorter: hex digits only
                return raw.lower()
        except ValueError:
            pass
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if len(data) == size:
        return data.hex()
    raise AttributeRuleError(what, f"{2 * size} hex digits or base64 of {size} bytes", raw)


#: OTLP SpanKind by proto enum name (the protobuf JSON mapping may write names instead of numbers).
KIND_NAMES = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
              "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}


def span_kind(raw: int | str) -> int:
    """SpanKind as its proto number, from a number or an enum name."""
    if isinstance(raw, str):
        kind = KIND_NAMES.get(raw)
        if kind is not None:
            return kind
    elif 0 <= raw <= 2**31 - 1:
        return raw
    raise AttributeRuleError("kind", "a SpanKind number or SPAN_KIND_* name", raw)


def unix_nanos(value: int, what: str) -> int:
    """An OTLP fixed64 time (ns since the Unix epoch)."""
    if not 0 <= value <= FIXED64_MAX:
        raise AttributeRuleError(what, f"nanoseconds 0..{FIXED64_MAX}", value)
    return value


def host_name(value: str) -> str:
    """A host name as a row key: NUL (which ``events.clock_id`` uses as its separator) shown as U+FFFD."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _sends(lts: list[int] | None, ptp: list[int] | None, unc: list[int] | None) -> Sends:
    """The parallel send.* arrays as (lts, ptp_ns, uncertainty_ns) triples: one element per header sent,
    so arrays that are present have the same length (semantic-conventions §5)."""
    if lts is None:
        if ptp is not None or unc is not None:
            raise AttributeRuleError(S.SEND_LTS, "present when send.ptp_ns / send.uncertainty_ns are", None)
        return ()
    n = len(lts)
    if ptp is not None and unc is not None and len(ptp) == n and len(unc) == n:
        return tuple(zip(lts, ptp, unc))  # noqa: B905 (the lengths were just compared)
    for name, other in ((S.SEND_PTP_NS, ptp), (S.SEND_UNCERTAINTY_NS, unc)):
        if other is not None and len(other) != n:
            raise AttributeRuleError(name, f"as long as {S.SEND_LTS} ({n} elements)", other)
    return tuple((v, ptp[i] if ptp is not None else None, unc[i] if unc is not None else None)
                 for i, v in enumerate(lts))


DEGRADED_NO_STAMP = Stamp(None, degraded=True)
#: Strings many spans repeat (host, clock key, span and clock names) are kept once, not once a span:
#: less memory for the window, and less of it to allocate. Bounded: a hostile input's made-up names
#: beyond MAX_CANON are not kept.
_CLOCKS: dict[tuple[str, int | None], tuple[str, str]] = {}  # (host, rank) -> (host, clock key)
_CANON: dict[str, str] = {}
_JOBS: dict[JobKey, JobKey] = {}
MAX_CANON = 1 << 16
_SAT = UNCERTAINTY_SATURATED


def build_record(trace_id: str, span_id: str, parent_id: str, name: str, kind: int, slots: list[Any],
                 otel_start_ns: int, otel_end_ns: int, resource_host: str | None = None,
                 resource_rank: int | None = None, line: int = 0, pos: int = -1,
                 resource_clock: str | None = None, resource_job: str | None = None,
                 resource_restart: int | None = None, resource_domain: Domain | None = None) -> SpanRecord:
    """The SpanRecord of one span from its ids, times and checked slots (``SPAN.read_*``)."""
    (ptp, unc, qual, lts, sketch, clock, host, eptp, eunc, equal, elts, rptp, runc, rqual, rlts, rsketch, recv,
     send_lts, send_ptp, send_unc, verdict, profile, rank, stamps, torch) = slots
    step = occurrence = job_id = restart = dump = None
    # The Resource's clock domain is the span's only when the span was stamped with the Resource's clock (a
    # provider's Resource is fixed; the process may since have moved to another clock, which names none).
    domain = resource_domain if clock is None or clock == resource_clock else None
    if torch is not None:
        step, occurrence, job_id, restart = torch[_OP_SLOTS:_DOMAIN_SLOTS]
        domain = _span_domain(torch[_DOMAIN_SLOTS:_DUMP_SLOTS], domain)
        reason, ops, pending, overwritten, requested_by = torch[_DUMP_SLOTS:]
        if reason is not None:
            dump = DumpInfo(reason, ops or 0, pending or 0, overwritten or 0, requested_by)
    degraded = verdict == "degrade"
    if stamps is not None:
        start, end, remote, recv, sends, sketch = _from_stamps(stamps, span_id, parent_id, otel_start_ns, otel_end_ns,
                                                               unc, qual, degraded)  # fmt: skip
        rsketch = None  # the sender's own sketch: no longer written (it is inside this span's)
    else:
        start = (NO_STAMP if not degraded else DEGRADED_NO_STAMP) if ptp is None and lts is None else \
            Stamp(ptp, _SAT if unc is None else unc, qual or "UNKNOWN", lts, degraded)
        end = None if eptp is None and elts is None else \
            Stamp(eptp, _SAT if eunc is None else eunc, equal or "UNKNOWN", elts, degraded)
        # The sender's header: its reading, judged by the sender's own policy (analyzer: a degraded client span).
        remote = None if rptp is None and rlts is None else \
            Stamp(rptp, _SAT if runc is None else runc, rqual or "UNKNOWN", rlts)
        sends = _sends(send_lts, send_ptp, send_unc) if send_lts is not None or send_ptp is not None or \
            send_unc is not None else ()
    if domain is not None:  # its readings were taken in one epoch of a host clock (clockdomain.py)
        start = _in_domain(start, domain)
        end = None if end is None else _in_domain(end, domain)
    host = host or resource_host or "?"
    clock = clock or resource_clock
    if rank is None:
        rank = resource_rank
    known = _CLOCKS.get((host, rank))
    if known is None:
        known = (host_name(host), clock_id(host_name(host), rank))
        if len(_CLOCKS) < MAX_CANON:
            _CLOCKS[(host, rank)] = known
    host, key = known
    if len(_CANON) > MAX_CANON:
        _CANON.clear()
    canon = _CANON.setdefault
    if job_id is None:  # the span's launch facts, else its Resource's (semantic-conventions §9.1)
        job_id = resource_job
    if restart is None:
        restart = resource_restart
    job = None if job_id is None else _job_key(job_id, 0 if restart is None else restart)
    return SpanRecord(
        trace_id, span_id, parent_id, canon(name, name), kind, host, start, end, otel_start_ns, otel_end_ns, sketch,
        rank, canon(clock, clock) if clock else "", canon(profile, profile) if profile else "", sends, remote,
        rsketch, recv, line, pos, degraded, key, None if torch is None else torch_op(torch[:_OP_SLOTS]), step=step,
        step_occurrence=occurrence or 0, job=job, dump=dump,
    )


def _span_domain(slots: list[Any], resource: Domain | None) -> Domain | None:
    """The domain of a span's readings: its own attributes over its Resource's, none when ``stepped``."""
    key, epoch, bound, read, stepped = slots
    if stepped:
        return None
    if key is None and epoch is None and bound is None and read is None:
        return resource
    if resource is not None:  # a span's own epoch after a step: the rest from its process
        key, read = key or resource.key, resource.read_ns if read is None else read
    return domain_of(key, epoch, bound, read)


def _in_domain(stamp: Stamp, domain: Domain) -> Stamp:
    return stamp if stamp.ptp_ns is None else msgspec.structs.replace(stamp, domain=domain)


def _job_key(job_id: str, restart: int) -> JobKey:
    """(job id, restart), one object per distinct key (every span of a rank names the same job)."""
    key = (job_id, restart)
    known = _JOBS.get(key)
    if known is None:
        if len(_JOBS) >= MAX_CANON:
            return key
        known = _JOBS[key] = key
    return known


def torch_op(slots: list[Any]) -> TorchOp | None:
    """The TorchOp of a span from its torch slots (``READ`` order), None without ``tempotrace.torch.op``
    (a step span, a launch fact alone). A group key must name exactly ``group_size`` ranks (so no
    record can claim a group larger than it says)."""
    (op, group, group_rank, size, seq, root, completion, src, dst, tag, p2p_seq, recv_lts, missing, sketch, rptp,
     runc, rqual, rlts, rspan, ambiguous) = slots
    if op is None:
        return None
    if group is not None:
        try:
            named = parse_key(group).size
        except ValueError as err:
            raise AttributeRuleError(S.TORCH_GROUP, f"a group key ({err})", group) from None
        if size is not None and named != size:
            raise AttributeRuleError(S.TORCH_GROUP, f"a key naming {S.TORCH_GROUP_SIZE} = {size} ranks", group)
        if group_rank is not None and group_rank >= named:
            raise AttributeRuleError(S.TORCH_GROUP_RANK, f"below the group's size ({named})", group_rank)
    remote = None if rptp is None and rlts is None else \
        Stamp(rptp, _SAT if runc is None else runc, rqual or "UNKNOWN", rlts)
    return TorchOp(op, group, group_rank, seq, root, completion, src, dst, 0 if tag is None else tag, p2p_seq,
                   recv_lts, tuple(missing) if missing else (), sketch, remote,
                   None if rspan is None else f"{rspan:016x}", ambiguous is True)


_QUALITY_NUMBER = {name: i for i, name in enumerate(QUALITIES)}


def _from_slots(got: Slots, span_id: str, parent_id: str,
                degraded: bool) -> tuple[Stamp, Stamp | None, Stamp | None, int | None, Sends, int]:
    """``_from_stamps`` from the C decoder's slots (stampsread.py: TT_STAMPS_SLOTS order)."""
    v, written, x = got
    start = Stamp(v[2], v[3], QUALITIES[v[4]], v[5], degraded)
    end = Stamp(v[7], v[8], QUALITIES[v[9]], v[10], degraded) if v[6] else None
    remote = Stamp(v[12], v[13], QUALITIES[v[14]], v[17]) if v[11] else None
    recv = (v[19] if v[18] else None) if v[11] else None
    sends = tuple((x[i], x[i + 1], x[i + 2]) for i in range(0, len(x), 4))
    if written is not None:
        sketch = int.from_bytes(written, "big")
    else:
        sketch = own_mask(span_id, parent_id)
    return start, end, remote, recv, sends, sketch


def _from_stamps(text: str | SpanStamps, span_id: str, parent_id: str, otel_start_ns: int, otel_end_ns: int,
                 unc: int | None, qual: str | None,
                 degraded: bool) -> tuple[Stamp, Stamp | None, Stamp | None, int | None, Sends, int]:
    """start, end, remote, recv lts, sends and sketch from a ``tempotrace.stamps`` text (semantic-conventions
    §1.4), or from its values already decoded and checked (a span table's columns: parquet_records.py). The
    sketch is the written one (a span that received a header); else the span's own id and its parent's: the
    rest of its causal past is the trace's parent links, which the analysis follows itself."""
    if isinstance(text, SpanStamps):
        st = text
    else:
        quality = None if qual is None else _QUALITY_NUMBER[qual]
        got = thread_reader().slots(text, otel_start_ns, otel_end_ns, unc, quality)
        if got is not None:  # the C decoder (the same values; what a refused text breaks is told below)
            return _from_slots(got, span_id, parent_id, degraded)
        try:
            st = decode_stamps(text, otel_start_ns, otel_end_ns, unc, quality)
        except StampsError as err:
            raise AttributeRuleError(S.STAMPS, err.rule + f" (token {err.token!r})", text) from None
    s = st.start
    start = Stamp(s.ptp_ns, s.uncertainty_ns, QUALITIES[s.clk_quality], s.lts, degraded)
    e = st.end
    end = None if e is None else Stamp(e.ptp_ns, e.uncertainty_ns, QUALITIES[e.clk_quality], e.lts, degraded)
    r = st.remote
    remote = None if r is None else Stamp(r.ptp_ns, r.uncertainty_ns, QUALITIES[r.clk_quality], r.lts)
    sends = tuple((x.lts, x.ptp_ns, x.uncertainty_ns) for x in st.sends)
    if st.sketch is not None:
        sketch = int.from_bytes(st.sketch, "big")
    else:
        sketch = own_mask(span_id, parent_id)
    return start, end, remote, None if r is None else r.recv_lts, sends, sketch
