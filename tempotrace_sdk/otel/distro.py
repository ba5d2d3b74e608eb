"""Zero-code setup: ``opentelemetry-instrument python app.py`` installs TempoTrace with no code change.

opentelemetry-instrumentation's ``sitecustomize`` runs before the program
(``auto_instrumentation._load``): it loads one distro (entry point group
``opentelemetry_distro``; $OTEL_PYTHON_DISTRO chooses when several are
installed) and calls its ``configure()``, then one configurator (group
``opentelemetry_configurator``; $OTEL_PYTHON_CONFIGURATOR chooses) with
``configure(auto_instrumentation_version=...)``, then the instrumentors.

``TempoTraceDistro`` only makes sure our configurator is the one chosen
(opentelemetry-distro's does the same for its own). ``TempoTraceConfigurator``
builds the SDK ``TracerProvider`` from the standard variables (resource from
OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, sampler and span limits read by
the SDK itself, OTEL_PYTHON_ID_GENERATOR) and then calls ``configure()``,
which adds the clock, the processor, the exporters (OTEL_TRACES_EXPORTER, our
JSON-lines file by default) and the propagator (OTEL_PROPAGATORS, else
tracecontext + baggage + tempotrace). OTEL_SDK_DISABLED=true installs nothing.

A program that also calls ``configure()`` replaces this pipeline instead of
adding a second one (``configure`` keeps one pipeline per process), so every
span is stamped and exported once. Traces only: metrics and logs exporters
named in OTEL_METRICS_EXPORTER / OTEL_LOGS_EXPORTER are not started (a
warning says so).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]  # untyped module
from opentelemetry.sdk._configuration import _BaseConfigurator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.util._importlib_metadata import entry_points

from .configure import Settings, TempoTraceHandle, configure
from .process import process_attributes

__all__ = ["ENTRY_POINT_NAME", "TempoTraceConfigurator", "TempoTraceDistro", "sdk_disabled"]

_log = logging.getLogger(__name__)

#: Our name in the opentelemetry_distro and opentelemetry_configurator groups (pyproject.toml).
ENTRY_POINT_NAME = "tempotrace"
#: Resource attribute the SDK's own configurator sets under auto-instrumentation.
AUTO_VERSION_ATTRIBUTE = "telemetry.auto.version"


def sdk_disabled() -> bool:
    """OTEL_SDK_DISABLED as the SDK reads it: only "true" (any case) disables."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _id_generator() -> IdGenerator | None:
    name = os.environ.get("OTEL_PYTHON_ID_GENERATOR", "").strip()
    if not name or name == "random":
        return None  # the SDK's default
    found = list(entry_points(group="opentelemetry_id_generator", name=name))
    if not found:
        raise ValueError(f"OTEL_PYTHON_ID_GENERATOR={name!r}: no such opentelemetry_id_generator entry point")
    generator = found[0].load()()
    if not isinstance(generator, IdGenerator):
        raise ValueError(f"OTEL_PYTHON_ID_GENERATOR={name!r} is not an IdGenerator")
    return generator


def _warn_unhandled_signals() -> None:
    for variable in ("OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
        names = [n.strip() for n in os.environ.get(variable, "").split(",") if n.strip() and n.strip() != "none"]
        if names:
            _log.warning(
                "tempotrace configurator sets up traces only: %s=%s is not started "
                "(set it up in code, or choose another configurator with OTEL_PYTHON_CONFIGURATOR)",
                variable,
                ",".join(names),
            )


class TempoTraceConfigurator(_BaseConfigurator):
    """Entry point ``opentelemetry_configurator: tempotrace``."""

    handle: TempoTraceHandle | None = None

    def _configure(self, **kwargs: Any) -> None:
        if sdk_disabled():
            _log.info("OTEL_SDK_DISABLED=true: tempotrace installs nothing")
            return
        _warn_unhandled_signals()
        attributes: dict[str, Any] = {}
        version = kwargs.get("auto_instrumentation_version")
        if version:
            attributes[AUTO_VERSION_ATTRIBUTE] = version
        # Clock, tenant, host and policy from their variables, resolved once: the Resource carries what
        # every span shares (otel/process.py), and configure() gets the same values.
        settings = Settings.resolve()
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the
            # provider reads OTEL_TRACES_SAMPLER(_ARG) and the span limits itself.
            attributes.update(process_attributes(settings.apply()))
            provider = TracerProvider(resource=Resource.create(attributes), id_generator=_id_generator())
            trace.set_tracer_provider(provider)
        type(self).handle = configure(clock=settings.clock, tenant=settings.tenant, host=settings.host,
                                      policy=settings.policy)  # fmt: skip
        _log.debug("tempotrace installed by opentelemetry-instrument (auto-instrumentation %s)", version)


class TempoTraceDistro(BaseDistro):  # type: ignore[misc]
    """Entry point ``opentelemetry_distro: tempotrace``."""

    def _configure(self, **kwargs: Any) -> None:
        # When several configurators are installed (opentelemetry-distro's
        # too) the first found would win: choose ours unless the user chose.
        os.environ.setdefault("OTEL_PYTHON_CONFIGURATOR", ENTRY_POINT_NAME)
