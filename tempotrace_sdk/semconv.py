"""Span attribute names: the contract between the span processor and the analysis.

Documented in spec/semantic-conventions.md (name, type, unit, meaning). Both
the OpenTelemetry layer (which writes them) and the analysis (which reads
them from exported spans) take the names from here and nowhere else.
"""

from __future__ import annotations

from .torchops import SPECS

PREFIX = "tempotrace."

# -- what the span processor writes on every span (semantic-conventions §1.2) ----------
#: str: every stamp of the span in one text (start, end, received header, sketch, sends): stamptext.py
STAMPS = "tempotrace.stamps"
UNCERTAINTY_NS = "tempotrace.uncertainty_ns"  #: int, ns: 3-sigma bound on the start reading (queryable)
CLK_QUALITY = "tempotrace.clk_quality"  #: str: "OK" | "DEGRADED" | "UNKNOWN" at the start (queryable)

# -- per process: on the Resource, or on each span when its Resource does not carry them (§1.2) --
CLOCK = "tempotrace.clock"  #: str: the clock source's name (e.g. "cpu", "sim:ntp-1")
HOST = "tempotrace.host"  #: str: the host (or simulated host) whose clock stamped the span
TENANT_ID = "tempotrace.tenant_id"  #: int 0..15: the local tenant
#: The host clock domain (§1.2, spec/clocks.md): readings of one kernel clock, comparable across processes.
CLOCK_DOMAIN = "tempotrace.clock.domain"  #: str: "kernel:<boot id>:tai" (absent: no shared clock)
CLOCK_EPOCH_NS = "tempotrace.clock.epoch_ns"  #: int, ns: CLOCK_TAI - CLOCK_MONOTONIC, measured; changes at a step
CLOCK_EPOCH_BOUND_NS = "tempotrace.clock.epoch_bound_ns"  #: int, ns: the epoch lies within this of epoch_ns
CLOCK_READ_NS = "tempotrace.clock.read_ns"  #: int, ns: the relative bound of one reading within the domain
CLOCK_STEPPED = "tempotrace.clock.stepped"  #: bool, span only: an epoch change may lie among its readings

# -- confidence policy verdict (§6): verdict and reason only when not "pass"; tier and retention per process
POLICY_VERDICT = "tempotrace.policy.verdict"  #: str: "flag" | "suspend_alerting" | "degrade" (old files: "pass" too)
POLICY_REASON = "tempotrace.policy.reason"  #: str: which rule failed
POLICY_TIER = "tempotrace.policy.tier"  #: str: the tenant's tier
POLICY_RETENTION_DAYS = "tempotrace.policy.retention_days"  #: int, days: how long the tenant keeps spans

# -- the previous attribute set (semantic-conventions §1.5): read in older exports, no longer written;
# stamptext.expand() gives a new span's values under these names.
PTP_NS = "tempotrace.ptp_ns"  #: int, ns TAI: the span start as our clock read it
TS_SOURCE = "tempotrace.ts_source"  #: str: "GTE" | "SW_GCC" | "CPU"
LTS = "tempotrace.lts"  #: int: Lamport value of the span-start event
SVC_SKETCH = "tempotrace.svc_sketch"  #: str, 64 hex chars: sketch of the causal past incl. this span
END_PTP_NS = "tempotrace.end.ptp_ns"
END_UNCERTAINTY_NS = "tempotrace.end.uncertainty_ns"
END_CLK_QUALITY = "tempotrace.end.clk_quality"
END_LTS = "tempotrace.end.lts"
REMOTE_PTP_NS = "tempotrace.remote.ptp_ns"
REMOTE_UNCERTAINTY_NS = "tempotrace.remote.uncertainty_ns"
REMOTE_CLK_QUALITY = "tempotrace.remote.clk_quality"
REMOTE_TS_SOURCE = "tempotrace.remote.ts_source"
REMOTE_LTS = "tempotrace.remote.lts"
REMOTE_TENANT_ID = "tempotrace.remote.tenant_id"
REMOTE_SVC_SKETCH = "tempotrace.remote.svc_sketch"
#: int: Lamport value of the receive event (the merge done at extract)
RECV_LTS = "tempotrace.recv.lts"
#: int array: lts of every header this span injected (one per outgoing hop)
SEND_LTS = "tempotrace.send.lts"
#: int array: ptp_ns of every header this span injected, same order
SEND_PTP_NS = "tempotrace.send.ptp_ns"
#: int array: uncertainty_ns of every header this span injected, same order
SEND_UNCERTAINTY_NS = "tempotrace.send.uncertainty_ns"

# -- demo / simulation ------------------------------------------------------------
CLOCK_PROFILE = "tempotrace.clock.profile"  #: str: simulated clock profile name (demo only)
RANK = "tempotrace.rank"  #: int: worker rank in a distributed job, when known

# -- torch.distributed (tempotrace_sdk.torch; spec/semantic-conventions.md §9) -----
# The launch: set on every span by configure() when the process was started by
# torchrun (or any launcher that sets RANK / WORLD_SIZE); tempotrace.rank above too.
LOCAL_RANK = "tempotrace.local_rank"  #: int: rank within the node (LOCAL_RANK)
WORLD_SIZE = "tempotrace.world_size"  #: int: processes in the job (WORLD_SIZE)
NODE_RANK = "tempotrace.node_rank"  #: int: the node's rank (GROUP_RANK), when the launcher sets it
JOB_ID = "tempotrace.job_id"  #: str: the job (TEMPOTRACE_JOB_ID or TORCHELASTIC_RUN_ID)
RESTART = "tempotrace.restart"  #: int: the elastic restart count (TORCHELASTIC_RESTART_COUNT)

# One span per collective or point-to-point op per rank.
TORCH_OP = "tempotrace.torch.op"  #: str: the torch.distributed function, e.g. "all_reduce", "isend"
TORCH_GROUP = "tempotrace.torch.group"  #: str: group key: member global ranks, e.g. "0-3", "0-6:2", "1,4,5"
TORCH_GROUP_RANK = "tempotrace.torch.group_rank"  #: int: this rank's rank within the group
TORCH_GROUP_SIZE = "tempotrace.torch.group_size"  #: int: ranks in the group
TORCH_BACKEND = "tempotrace.torch.backend"  #: str: the group's backend, e.g. "gloo", "nccl"
TORCH_ROOT = "tempotrace.torch.root"  #: int: global rank of the root (broadcast, reduce, gather, scatter)
TORCH_BYTES = "tempotrace.torch.bytes"  #: int, bytes: tensor bytes this rank passed to the op (§9.3)
TORCH_SEQ = "tempotrace.torch.seq"  #: int: SDK-kept collective sequence number within the group, from 0
#: str: how the end was observed: "return" (a blocking call) | "queued" (a blocking call on a device stream:
#: queued, no completion) | "future" | "wait" | "sweep" | "gpu" | "unfinished" | "error" (spec/torch.md §1.3)

TORCH_COMPLETION = "tempotrace.torch.completion"
#: Every value of TORCH_COMPLETION the SDK writes (spec/torch.md §1.3), and those whose end stamp is
#: not a completion: a consumer takes no end from them.
TORCH_COMPLETIONS = ("return", "queued", "future", "wait", "sweep", "gpu", "unfinished", "error", "pending")
TORCH_NOT_COMPLETED = frozenset(("queued", "unfinished", "error", "pending"))
#: What each traced collective guarantees of its members' events (spec/analysis.md §1.3), the one list: each
#: op's claim is stated beside its arguments in torchops.SPECS (the table the instrumentation wraps; it imports
#: nothing), and the analysis's claims and the demo's story read it here. "all": every start precedes every
#: end; "root_start": the root's start precedes every end; "root_end": every start precedes the root's end.
TORCH_CLAIMS: dict[str, str] = {spec.name: spec.claim for spec in SPECS if spec.claim is not None}
# The flight recorder's dump record: one ``torch.dump`` span per rank per dump (spec/torch.md §7.3).
TORCH_DUMP_REASON = "tempotrace.torch.dump.reason"  #: str: one of TORCH_DUMP_REASONS
#: Why a dump was taken: a pending op past hang_timeout; dump(); the opt-in signal; an exception leaving step();
#: interpreter exit; SIGTERM; another rank's hang dump (asked through the store).
TORCH_DUMP_REASONS = ("hang", "request", "signal", "exception", "exit", "sigterm", "peer")
TORCH_DUMP_OPS = "tempotrace.torch.dump.ops"  #: int: op spans this dump wrote
TORCH_DUMP_PENDING = "tempotrace.torch.dump.pending"  #: int: of which pending (completion "pending")
TORCH_DUMP_OVERWRITTEN = "tempotrace.torch.dump.overwritten"  #: int: ops the ring overwrote unexported, since start
TORCH_DUMP_REQUESTED_BY = "tempotrace.torch.dump.requested_by"  #: int, reason "peer": the rank whose dump asked
TORCH_PEER = "tempotrace.torch.peer"  #: int: p2p: global rank of the other side (-1: any source, not yet known)
TORCH_SRC = "tempotrace.torch.src"  #: int: p2p: global rank of the sender
TORCH_DST = "tempotrace.torch.dst"  #: int: p2p: global rank of the receiver
TORCH_TAG = "tempotrace.torch.tag"  #: int: p2p tag
TORCH_P2P_SEQ = "tempotrace.torch.p2p_seq"  #: int: p2p: sequence number per (group, src, dst, tag), from 0
#: bool, receives only: true when an any-source and a specific receive were outstanding together on this
#: receive's (group, tag): torch may have paired them otherwise than their p2p_seq says (spec/torch.md §2)
TORCH_P2P_AMBIGUOUS = "tempotrace.torch.p2p_ambiguous"
TORCH_BATCHED = "tempotrace.torch.batched"  #: bool: p2p op issued through batch_isend_irecv
TORCH_BUCKET = "tempotrace.torch.ddp.bucket"  #: int: DDP gradient bucket index (comm_hook spans)
TORCH_STEP = "tempotrace.torch.step"  #: int: the training step (step() spans and everything inside)
#: int, step spans: how many times the process used the step's number before (written when > 0; torch.md §4.1)
TORCH_STEP_OCCURRENCE = "tempotrace.torch.step_occurrence"
#: str, compute spans (trace_compute, torch.md §4.3): "forward" | "backward" | "optimizer.step"
TORCH_COMPUTE = "tempotrace.torch.compute"
TORCH_MODULE = "tempotrace.torch.module"  #: str, forward / backward spans: the module's class name
TORCH_OPTIMIZER = "tempotrace.torch.optimizer"  #: str, optimizer.step spans: the optimizer's class name
TORCH_CARRIAGE = "tempotrace.torch.carriage"  #: str, step spans: "none" | "step" | "step+p2p" | "op"

# Records received (spec/torch.md §3): the merge of every valid record, on the
# span that received them (op span in "op" mode, step span in "step" mode, p2p recv span).
TORCH_RECV_LTS = "tempotrace.torch.recv.lts"  #: int: Lamport value of the merge: max(local, all remote lts) + 1
TORCH_RECV_COUNT = "tempotrace.torch.recv.count"  #: int: valid records merged (other ranks only)
TORCH_RECV_MISSING = "tempotrace.torch.recv.missing"  #: int[]: ranks whose record was absent or invalid
TORCH_RECV_SKETCH = "tempotrace.torch.recv.svc_sketch"  #: str, 64 hex: union of the merged records' sketches
# p2p only: the one sender's record, like the remote.* of an HTTP hop (§4) but
# under its own names: the receive span's start is the posting of the receive,
# not an event after the send, so the hop rule of §4 does not apply to it.
TORCH_REMOTE_PTP_NS = "tempotrace.torch.remote.ptp_ns"  #: int, ns TAI: the sender's send event
TORCH_REMOTE_UNCERTAINTY_NS = "tempotrace.torch.remote.uncertainty_ns"  #: int, ns
TORCH_REMOTE_CLK_QUALITY = "tempotrace.torch.remote.clk_quality"  #: str
TORCH_REMOTE_LTS = "tempotrace.torch.remote.lts"  #: int: equals one element of the send span's send.lts
TORCH_REMOTE_SPAN_ID = "tempotrace.torch.remote.span_id"  #: str, 16 hex: the sender's span

# check_clocks (spec/torch.md §5): one span per rank.
TORCH_CLOCK_REF_RANK = "tempotrace.torch.clock_check.ref_rank"  #: int: the reference rank (0)
TORCH_CLOCK_OFFSET_NS = "tempotrace.torch.clock_check.offset_ns"  #: int, ns: this clock minus the reference's
TORCH_CLOCK_BOUND_NS = "tempotrace.torch.clock_check.bound_ns"  #: int, ns: |measured - true offset| <= this
TORCH_CLOCK_RTT_NS = "tempotrace.torch.clock_check.rtt_ns"  #: int, ns: the best round's round trip
#: int[4], ns TAI: the best round's t1 (send, here), t2 (recv, ref), t3 (reply, ref), t4 (recv, here)
TORCH_CLOCK_TIMESTAMPS = "tempotrace.torch.clock_check.timestamps"
TORCH_CLOCK_VERDICT = "tempotrace.torch.clock_check.verdict"  #: str: ok|unbounded|unmeasured|irreconcilable|ref
#: Every value of TORCH_CLOCK_VERDICT check_clocks writes (spec/torch.md §5).
TORCH_CLOCK_VERDICTS = ("ref", "ok", "unbounded", "unmeasured", "irreconcilable")
TORCH_CLOCK_SUSPECTS = "tempotrace.torch.clock_check.suspects"  #: int[]: ranks named (same on every rank)

# GPU timing (spec/torch.md §6): a collective timed on its CUDA stream.
TORCH_GPU_PTP_NS = "tempotrace.torch.gpu.ptp_ns"  #: int, ns TAI: the op's start on the GPU (event mapped)
TORCH_GPU_END_PTP_NS = "tempotrace.torch.gpu.end.ptp_ns"  #: int, ns TAI: the op's end on the GPU
TORCH_GPU_UNCERTAINTY_NS = "tempotrace.torch.gpu.uncertainty_ns"  #: int, ns: bound on both
TORCH_GPU_TS_SOURCE = "tempotrace.torch.gpu.ts_source"  #: str: "SW_GCC"

# -- export loss: RESOURCE attributes of a drop record (a line with no spans) ------
#: int: spans this exporter instance has dropped so far (cumulative; readers take the max per writer)
EXPORT_DROPPED_SPANS = "tempotrace.export.dropped_spans"
#: str: unique per exporter instance (host/pid/random); readers sum the max count over writers
EXPORT_WRITER_ID = "tempotrace.export.writer_id"
