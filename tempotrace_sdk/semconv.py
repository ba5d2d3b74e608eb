"""Span attribute names: the contract between the span processor and the analysis.

Documented in spec/semantic-conventions.md (name, type, unit, meaning). Both
the OpenTelemetry layer (which writes them) and the analysis (which reads
them from exported spans) take the names from here and nowhere else.
"""

from __future__ import annotations

PREFIX = "tempotrace."

# -- the span's own start event (set in on_start) --------------------------------
PTP_NS = "tempotrace.ptp_ns"  #: int, ns TAI: the span start as our clock read it
UNCERTAINTY_NS = "tempotrace.uncertainty_ns"  #: int, ns: 3-sigma bound on PTP_NS
CLK_QUALITY = "tempotrace.clk_quality"  #: str: "OK" | "DEGRADED" | "UNKNOWN"
TS_SOURCE = "tempotrace.ts_source"  #: str: "GTE" | "SW_GCC" | "CPU"
LTS = "tempotrace.lts"  #: int: Lamport value of the span-start event
TENANT_ID = "tempotrace.tenant_id"  #: int 0..15: the local tenant
SVC_SKETCH = "tempotrace.svc_sketch"  #: str, 64 hex chars: sketch of the causal past incl. this span
CLOCK = "tempotrace.clock"  #: str: the clock source's name (e.g. "cpu", "sim:ntp-1")
HOST = "tempotrace.host"  #: str: the host (or simulated host) whose clock stamped the span

# -- the span's end event (set by our decorators / context manager before end) ----
END_PTP_NS = "tempotrace.end.ptp_ns"
END_UNCERTAINTY_NS = "tempotrace.end.uncertainty_ns"
END_CLK_QUALITY = "tempotrace.end.clk_quality"
END_LTS = "tempotrace.end.lts"

# -- the remote header a server span's parent came with (extract side of a hop) ---
REMOTE_PTP_NS = "tempotrace.remote.ptp_ns"
REMOTE_UNCERTAINTY_NS = "tempotrace.remote.uncertainty_ns"
REMOTE_CLK_QUALITY = "tempotrace.remote.clk_quality"
REMOTE_TS_SOURCE = "tempotrace.remote.ts_source"
REMOTE_LTS = "tempotrace.remote.lts"
REMOTE_TENANT_ID = "tempotrace.remote.tenant_id"
REMOTE_SVC_SKETCH = "tempotrace.remote.svc_sketch"
#: int: Lamport value of the receive event (the merge done at extract)
RECV_LTS = "tempotrace.recv.lts"

# -- the inject side of a hop (set on the span current at inject time) ------------
#: int array: lts of every header this span injected (one per outgoing hop)
SEND_LTS = "tempotrace.send.lts"
#: int array: ptp_ns of every header this span injected, same order
SEND_PTP_NS = "tempotrace.send.ptp_ns"
#: int array: uncertainty_ns of every header this span injected, same order
SEND_UNCERTAINTY_NS = "tempotrace.send.uncertainty_ns"

# -- confidence policy verdict ----------------------------------------------------
POLICY_VERDICT = "tempotrace.policy.verdict"  #: str: "pass" | "flag" | "suspend_alerting" | "degrade"
POLICY_REASON = "tempotrace.policy.reason"  #: str: which rule failed, empty on pass
POLICY_TIER = "tempotrace.policy.tier"  #: str: the tenant's tier
POLICY_RETENTION_DAYS = "tempotrace.policy.retention_days"  #: int, days: how long the tenant keeps spans

# -- demo / simulation ------------------------------------------------------------
CLOCK_PROFILE = "tempotrace.clock.profile"  #: str: simulated clock profile name (demo only)
RANK = "tempotrace.rank"  #: int: worker rank in a distributed job, when known
