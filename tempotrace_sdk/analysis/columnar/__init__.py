"""The columnar analysis (issue 24; spec/analysis.md §5.6): spans decoded into Arrow columns, never one Python
object per span on the main path. Built stage by stage against the per-span engine, the reference: the
decode first (``decode.py``, its attribute pivot in ``pivot.py``), then which rows may break a value rule
(``rules.py``), then each row's trace part (``parts.py``) and its stamps text decoded (``stamps.py``), and
each span's host, rank, clock and job (``records.py``)."""
