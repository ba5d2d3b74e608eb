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


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        tempotrace_sdk.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("expected AttributeError")
