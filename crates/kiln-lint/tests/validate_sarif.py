#!/usr/bin/env python3
"""Validates SARIF documents against the vendored SARIF 2.1.0 JSON schema.

Usage: validate_sarif.py FILE...   (`-` reads one document from stdin)
Exit 0 when every document is valid, 1 otherwise, 2 when the Python
`jsonschema` package is missing.
"""
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    print("validate_sarif: the Python jsonschema package is not installed", file=sys.stderr)
    sys.exit(2)

SCHEMA = pathlib.Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


def main(paths):
    schema = json.loads(SCHEMA.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    bad = 0
    for p in paths:
        doc = json.load(sys.stdin) if p == "-" else json.loads(pathlib.Path(p).read_text())
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            print(f"{p}: {'/'.join(map(str, e.path))}: {e.message}", file=sys.stderr)
        bad += bool(errors)
    print(f"sarif: {len(paths) - bad} of {len(paths)} documents valid against SARIF 2.1.0")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["-"]))
