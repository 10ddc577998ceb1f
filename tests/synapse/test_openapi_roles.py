"""Every operation's description ends with the role it needs on its mind (docs/teams.md,
"Roles"): read from the declaration the permission check uses, never written by hand.

That the line matches what each route enforces is tried role by role in
tests/security/test_isolation_matrix.py."""

from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

from synapse.api.schema import ANY_SIGNED_IN, NO_SIGN_IN, ROLE_PREFIX

BASELINE = Path(__file__).parent / "data" / "openapi_operations.txt"
ROLE_LINES = {f"{ROLE_PREFIX}{words}." for words in (
    "viewer or above", "editor or above", "owner", ANY_SIGNED_IN, NO_SIGN_IN)}


def role_lines() -> dict[str, str]:
    """``METHOD path`` → the last line of its description."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {f"{method.upper()} {path}": operation.get("description", "").splitlines()[-1]
            for path, item in schema["paths"].items() for method, operation in item.items()
            if operation.get("description")}


def test_every_operation_of_the_baseline_says_its_role():
    lines = role_lines()
    operations = [" ".join(line.split()[:2]) for line in BASELINE.read_text().splitlines()
                  if line]
    missing = [op for op in operations if lines.get(op) not in ROLE_LINES]
    assert operations and not missing, f"no role line: {missing}"


def test_the_role_line_follows_the_routes_declaration():
    lines = role_lines()
    assert lines["GET /memory"] == "Role: viewer or above."
    assert lines["POST /memory/{memory_id}/verify"] == "Role: editor or above."
    assert lines["POST /memory/reset"] == "Role: owner."
    assert lines["DELETE /minds/{mind_id}/keys/{key_id}"] == "Role: owner."
    assert lines["GET /minds/{mind_id}"] == "Role: viewer or above."
    assert lines["PATCH /minds/{mind_id}"] == "Role: owner."
    assert lines["POST /minds"] == f"Role: {ANY_SIGNED_IN}."
    assert lines["POST /auth/login"] == f"Role: {NO_SIGN_IN}."
