"""A plain ``requests`` client for the zero-code tests: GET the URL, print the body. No tracing code."""

from __future__ import annotations

import sys

import requests

print(requests.get(sys.argv[1], timeout=10).text)
