"""Two tiny HTTP calls (health, tokenize) with the standard library: no client dependency to pin."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def get_ok(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def post_json(url: str, payload: dict[str, Any], timeout_s: float = 10.0) -> Any | None:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
