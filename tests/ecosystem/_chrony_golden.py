"""A TRACKING reply recorded from Debian's chronyd 4.3 (client in a test namespace, synchronised to a
``local stratum 1`` server over veth), and what ``chronyc tracking`` printed when asked just before."""

GOLDEN_SEQUENCE = 0x01020304
GOLDEN_REPLY = bytes.fromhex(
    "060200000021000500000000000000000102030400000000000000000a4d00010a4d0001000000000000000000000000"
    "0001000000020000000000006b0db2f122c02d98df519945cafb394cceebcc6deecf38b3e6da27ccf6f87fbde28ee888"
    "ec990be102c362f7"
)
GOLDEN_CHRONYC = """\
Reference ID    : 0A4D0001 (10.77.0.1)
Stratum         : 2
Ref time (UTC)  : Mon Nov 30 17:31:29 2026
System time     : 0.000002599 seconds fast of NTP time
Last offset     : +0.000000004 seconds
RMS offset      : 0.000000014 seconds
Frequency       : 0.001 ppm fast
Residual freq   : +0.000 ppm
Skew            : 0.015 ppm
Root delay      : 0.000008518 seconds
Root dispersion : 0.000291749 seconds
Update interval : 0.8 seconds
Leap status     : Normal"""
