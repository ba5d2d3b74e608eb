"""The span table's layout: its version, its metadata keys, its columns and the exporter's part names, defined
once (spec/parquet.md §2-§4).

Pure names and kinds, no pyarrow: inputs.py recognises parts by name without the extra installed, and
parquet_schema.py turns the columns into an Arrow schema. The typed attribute columns come from the
analysis's own rule table (values.py): each ``tempotrace.*`` attribute it knows gets the column of its
rule's kind, so an attribute added there is a column here, and what a column may hold is what the
analysis would read.
"""

from __future__ import annotations

import re

import msgspec

from .. import semconv as S
from .schema import BOOL, HEX, INT, INT_ARRAY, STRING
from .values import RESOURCE_RULES, SPAN_RULES

__all__ = [
    "COLUMNS", "NOTES_KEY", "PART_SUFFIX", "RESOURCE_COLUMNS", "SPAN_ATTRIBUTE_COLUMNS",
    "STAMPS_COLUMNS", "UNFINISHED_SUFFIX", "VERSION", "VERSION_KEY", "BadNote", "Column", "Notes", "part_name",
    "part_of",
]

#: The schema's version, in the file's key-value metadata under VERSION_KEY. A reader refuses a major version it
#: does not know; columns may be added within a version (readers take a missing column as all null).
VERSION = "tempotrace.parquet/1"
VERSION_KEY = "tempotrace.parquet"
#: What the file says about its input besides its rows (bad lines, drop records): JSON, ``Notes``.
NOTES_KEY = "tempotrace.notes"

# Kinds beyond the rules' (schema.py): ids as fixed-size binary, JSON text, a map of JSON AnyValues.
ID16, ID8, JSON, MAP, SENDS = "id16", "id8", "json", "map", "sends"


class Column(msgspec.Struct, frozen=True):
    """One column: its name, its kind (an attribute rule's kind, or one of the kinds above), the bytes of a
    fixed-size binary (HEX), and whether it is dictionary-encoded in Arrow (values that repeat)."""

    name: str
    kind: str
    size: int = 0
    dictionary: bool = False
    #: the attribute it holds (typed attribute columns), else ""
    attribute: str = ""


# -- the OTLP span (spec/parquet.md §2.1) -----------------------------------------------------------------
TRACE_ID, SPAN_ID, PARENT_SPAN_ID = "trace_id", "span_id", "parent_span_id"
TRACE_STATE, FLAGS, NAME, KIND = "trace_state", "flags", "name", "kind"
START, END = "start_time_unix_nano", "end_time_unix_nano"
DROPPED_ATTRIBUTES, EVENTS, DROPPED_EVENTS = "dropped_attributes_count", "events", "dropped_events_count"
LINKS, DROPPED_LINKS = "links", "dropped_links_count"
STATUS_CODE, STATUS_MESSAGE = "status.code", "status.message"
SCOPE_NAME, SCOPE_VERSION = "scope.name", "scope.version"
#: every attribute no typed column holds as written: key -> the OTLP JSON AnyValue text
ATTRIBUTES = "attributes"
#: a span object the typed columns cannot hold (malformed, ids that are not ids...): its OTLP JSON, as written
OTLP_JSON = "otlp_json"
#: where the row came from: the input file and line (convert), null for rows an exporter wrote
INPUT_PATH, INPUT_LINE = "input.path", "input.line"

OTLP_COLUMNS = (
    Column(TRACE_ID, ID16), Column(SPAN_ID, ID8), Column(PARENT_SPAN_ID, ID8), Column(TRACE_STATE, STRING),
    Column(FLAGS, INT), Column(NAME, STRING, dictionary=True), Column(KIND, INT), Column(START, INT), Column(END, INT),
    Column(STATUS_CODE, INT), Column(STATUS_MESSAGE, STRING), Column(EVENTS, JSON), Column(LINKS, JSON),
    Column(DROPPED_ATTRIBUTES, INT), Column(DROPPED_EVENTS, INT), Column(DROPPED_LINKS, INT),
    Column(SCOPE_NAME, STRING, dictionary=True), Column(SCOPE_VERSION, STRING, dictionary=True),
)

# -- the decoded stamps text (spec/parquet.md §2.3, semantic-conventions §1.4) --------------------------
STAMPS_SOURCE = "stamps.ts_source"
STAMPS_START = ("stamps.start.ptp_ns", "stamps.start.uncertainty_ns", "stamps.start.clk_quality", "stamps.start.lts")
STAMPS_END = ("stamps.end.ptp_ns", "stamps.end.uncertainty_ns", "stamps.end.clk_quality", "stamps.end.lts")
STAMPS_REMOTE = ("stamps.remote.ptp_ns", "stamps.remote.uncertainty_ns", "stamps.remote.clk_quality",
                 "stamps.remote.ts_source", "stamps.remote.tenant_id", "stamps.remote.lts")
STAMPS_RECV_LTS = "stamps.recv.lts"
STAMPS_SKETCH = "stamps.sketch"
#: list<struct<lts, ptp_ns, uncertainty_ns, clk_quality>>, in send order
STAMPS_SENDS = "stamps.sends"
SEND_FIELDS = ("lts", "ptp_ns", "uncertainty_ns", "clk_quality")


def _reading(names: tuple[str, ...]) -> tuple[Column, ...]:
    return tuple(Column(n, STRING, dictionary=True) if n.endswith(("clk_quality", "ts_source")) else Column(n, INT)
                 for n in names)


STAMPS_COLUMNS = (
    Column(STAMPS_SOURCE, STRING, dictionary=True), *_reading(STAMPS_START), *_reading(STAMPS_END),
    *_reading(STAMPS_REMOTE), Column(STAMPS_RECV_LTS, INT), Column(STAMPS_SKETCH, HEX, 32), Column(STAMPS_SENDS, SENDS),
)


def _attribute(name: str, prefix: str = "") -> Column:
    rule = SPAN_RULES.get(name) or RESOURCE_RULES[name]
    size = rule.digits // 2 if rule.kind == HEX else 0
    return Column(prefix + name, rule.kind, size, dictionary=rule.kind == STRING and bool(prefix), attribute=name)


# -- span attributes (spec/parquet.md §2.2): one column per tempotrace.* attribute the analysis knows ------------
#: the stamps text is not kept as text: decoded into STAMPS_COLUMNS
SPAN_ATTRIBUTE_COLUMNS = tuple(_attribute(name) for name in SPAN_RULES if name != S.STAMPS)
assert all(c.kind in (INT, STRING, BOOL, HEX, INT_ARRAY) for c in SPAN_ATTRIBUTE_COLUMNS)

# -- the Resource (spec/parquet.md §2.4): what the analysis reads, the service and the launch; the rest in a map --
RESOURCE_PREFIX = "resource."
RESOURCE_ATTRIBUTES = "resource.attributes"
_RESOURCE_TYPED = (*RESOURCE_RULES, S.TENANT_ID, S.POLICY_TIER, S.POLICY_RETENTION_DAYS, S.WORLD_SIZE, S.LOCAL_RANK,
                   S.NODE_RANK)
RESOURCE_COLUMNS = (
    Column(RESOURCE_PREFIX + "service.name", STRING, dictionary=True, attribute="service.name"),
    *(_attribute(name, RESOURCE_PREFIX) for name in _RESOURCE_TYPED),
)

COLUMNS = (
    *OTLP_COLUMNS, *STAMPS_COLUMNS, *SPAN_ATTRIBUTE_COLUMNS, Column(ATTRIBUTES, MAP), *RESOURCE_COLUMNS,
    Column(RESOURCE_ATTRIBUTES, MAP), Column(OTLP_JSON, JSON),
    Column(INPUT_PATH, STRING, dictionary=True), Column(INPUT_LINE, INT),
)
assert len({c.name for c in COLUMNS}) == len(COLUMNS)


# -- notes: the input besides its spans (spec/parquet.md §3) ---------------------------------------------------
class BadNote(msgspec.Struct, frozen=True, array_like=True):
    """A line that could not be read: before row ``pos`` of the file; its input ``path``, ``line`` and why."""

    pos: int
    path: str
    line: int
    reason: str


class Notes(msgspec.Struct, omit_defaults=True):
    """What a span table says about its input besides its rows: the OTLP trace lines its rows came from (0 or
    more: a drop record is a trace line without rows), the bad lines (all counted, the first few kept), the
    files a directory gave that held no traces, and the exporters' drop records (largest count per writer)."""

    trace_lines: int = 0
    bad_lines: int = 0
    bad_first: list[BadNote] = []
    not_traces: list[str] = []
    loss: dict[str, int] = {}


# -- the exporter's parts (spec/parquet.md §4) ------------------------------------------------------------
#: A part is one exported batch: ``part-<writer>-<seq>.parquet``, written as ``<name>.tmp`` and renamed when
#: complete. A ``.tmp`` left behind is a part its writer did not finish (killed): a reader counts it as lost.
PART_SUFFIX = ".parquet"
UNFINISHED_SUFFIX = ".parquet.tmp"
_PART = re.compile(r"part-(?P<writer>[0-9]+-[0-9a-f]+)-(?P<seq>[0-9]{8,})\.parquet(?:\.tmp)?")


def part_name(writer: str, seq: int) -> str:
    """The file name of a writer's ``seq``-th part (``writer``: ``<pid>-<hex token>``)."""
    return f"part-{writer}-{seq:08d}{PART_SUFFIX}"


def part_of(name: str) -> tuple[str, int] | None:
    """(writer, seq) of a part's file name (finished or not), None for any other name."""
    m = _PART.fullmatch(name)
    return None if m is None else (m["writer"], int(m["seq"]))
