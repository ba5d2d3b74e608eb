"""The top-level package: every public name resolves, and the codec stays sans-IO."""

import subprocess
import sys

import tempotrace_sdk


def test_every_name_in_all_resolves() -> None:
    for name in tempotrace_sdk.__all__:
        assert getattr(tempotrace_sdk, name) is not None, name


def test_import_loads_neither_opentelemetry_nor_the_native_module() -> None:
    # A fresh interpreter: this test process has long imported both.
    probe = (
        "import sys, tempotrace_sdk\n"
        "bad = [m for m in sys.modules if m.startswith('opentelemetry') or m == 'tempotrace_sdk._phc']\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.strip() == ""


#: What ``import tempotrace_sdk`` must not pull in: the clock sources doing IO (PHC, ptp4l over a
#: socket, adjtimex via ctypes, the selection and survey that use them) and the modules they need
#: (threading is not listed: the wire's LamportClock holds a lock).
_IO_MODULES = (
    "tempotrace_sdk.clocks._native",
    "tempotrace_sdk.clocks.cpu",
    "tempotrace_sdk.clocks.kernel",
    "tempotrace_sdk.clocks.phc",
    "tempotrace_sdk.clocks.ptp4l",
    "tempotrace_sdk.clocks.ptpquality",
    "tempotrace_sdk.clocks.refresh",
    "tempotrace_sdk.clocks.select",
    "tempotrace_sdk.clocks._survey",
    "ctypes",
    "socket",
)


def test_import_stays_sans_io_and_clock_names_load_on_use() -> None:
    probe = (
        "import sys, tempotrace_sdk\n"
        f"print(','.join(m for m in {_IO_MODULES!r} if m in sys.modules))\n"
        "from tempotrace_sdk.clocks import PhcClock, Ptp4lHealth, select_clock\n"
        "import tempotrace_sdk.clocks as c\n"
        "print(all(getattr(c, n) is not None for n in c.__all__), 'tempotrace_sdk.clocks.phc' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    loaded, resolved = out.splitlines()
    assert loaded == ""
    assert resolved == "True True"


def test_clock_functions_named_like_their_submodules_stay_functions() -> None:
    """``preflight`` and ``survey`` are both submodules and functions; importing the submodule first
    must not make ``from tempotrace_sdk.clocks import preflight`` hand out a module."""
    probe = (
        "import tempotrace_sdk.clocks._survey, tempotrace_sdk.clocks.preflight\n"
        "from tempotrace_sdk.clocks import preflight, survey\n"
        "print(callable(preflight), callable(survey), preflight.__name__, survey.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "True", "preflight", "survey"]


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        tempotrace_sdk.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("expected AttributeError")
