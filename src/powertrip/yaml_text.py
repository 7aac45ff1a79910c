"""YAML parsing with errors that point at the line, shared by every file PowerTrip reads."""

from typing import Any

import yaml


def parse_yaml(text: str, source: str, error: type[Exception]) -> Any:
    """Parse YAML (or JSON) text; a syntax error becomes `error` naming source, line, column."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as problem:
        mark = getattr(problem, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        raise error(f"{source}:{where} not valid YAML: {problem}") from None
