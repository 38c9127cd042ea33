"""A small JSON object from a file another code wrote (config.json, generation_config.json, a
tokeniser's settings, an import config): read whole, decoded as core/data/tokenisers.py decodes
the JSON a checkpoint carries, and every problem an ImportFileError naming the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minitx.core.data.tokenisers import TokeniserFileError, parse_json
from minitx.core.importing.errors import ImportFileError


def read_json_object(path: Path, max_bytes: int, what: str) -> dict[str, Any]:
    """The JSON object in `path`, at most `max_bytes` long (`what` the file is, for the message
    when it is longer); ImportFileError for a missing, unreadable, oversized or broken file."""
    if not path.is_file():
        raise ImportFileError(f"no such file: {path}" if not path.exists() else f"{path} is not a file")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ImportFileError(f"{path} is {size:,} bytes long; {what} is at most {max_bytes:,}")
        data = parse_json(path.name, path.read_bytes())
    except OSError as e:
        raise ImportFileError(f"cannot read {path}: {e.strerror or e}") from None
    except TokeniserFileError as e:
        raise ImportFileError(f"{path} {e.reason}") from None
    if not isinstance(data, dict):
        raise ImportFileError(f"{path} is not a JSON object")
    return data
