"""The OpenAPI schema offers exactly the operations in data/openapi_operations.txt."""

from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

BASELINE = Path(__file__).parent / "data" / "openapi_operations.txt"
METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "trace")


def operations(schema: dict) -> set[str]:
    """``METHOD path operationId`` of every operation the schema declares."""
    return {f"{method.upper()} {path} {operation['operationId']}"
            for path, item in schema["paths"].items()
            for method, operation in item.items() if method in METHODS}


def test_the_schema_has_exactly_the_operations_of_the_baseline():
    baseline = set(BASELINE.read_text().splitlines()) - {""}
    offered = operations(SchemaGenerator().get_schema(request=None, public=True))
    added, removed = sorted(offered - baseline), sorted(baseline - offered)
    assert not added and not removed, (
        "The API's operations changed. A removed or renamed operation (method, path or "
        "operationId) breaks the clients generated from the schema; a new one is added to "
        "tests/synapse/data/openapi_operations.txt (sorted) once it is meant to stay.\n"
        f"New: {added}\nGone: {removed}")


def test_the_baseline_is_sorted_and_has_no_duplicates():
    lines = BASELINE.read_text().splitlines()
    assert lines == sorted(set(lines))
