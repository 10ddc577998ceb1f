"""Walking /api/schema/: every operation, with plausible parameters and bodies from the schema.

The security tests iterate over what the schema declares rather than a hand-kept route
list, so a route that lands later is attacked the day it appears.
"""

import json
import re
from dataclasses import dataclass, field

from rest_framework.test import APIClient

SCHEMA_ACCEPT = "application/vnd.oai.openapi+json"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Routes an agent (Mind Key) may never use, whatever its scope (docs/api.md: Minds, Mind
# Keys, Auth).
HUMAN_ONLY = [re.compile(pattern) for pattern in (
    r"^/minds(/|$)", r"^/invitations(/|$)", r"^/auth/(me|logout|password|export)$",
    r"/(verify|unverify)$",
    r"^/memory/bulk-(verify|unverify|trash)$",
)]


# Routes about the whole mind that a path-scoped Mind Key is refused (403 path_scoped_key;
# docs/api.md, "Keys limited to paths").
WHOLE_MIND = [re.compile(pattern) for pattern in (
    r"^/memory/audit$", r"^/memory/compact$", r"/uncompact$", r"^/memory/mind-import$",
)]


def load_schema() -> dict:
    response = APIClient().get("/api/schema/", HTTP_ACCEPT=SCHEMA_ACCEPT)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


@dataclass
class Operation:
    method: str
    path: str
    spec: dict
    schema: dict = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def is_public(self) -> bool:
        """No credentials needed: the schema lists no security, or an empty requirement."""
        security = self.spec.get("security")
        return security is None or {} in security

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def is_human_only(self) -> bool:
        return any(pattern.search(self.path) for pattern in HUMAN_ONLY)

    @property
    def is_whole_mind(self) -> bool:
        return any(pattern.search(self.path) for pattern in WHOLE_MIND)

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    def parameters(self, location: str) -> list[dict]:
        return [self.resolve(p) for p in self.spec.get("parameters", [])
                if self.resolve(p).get("in") == location]

    @property
    def takes_mind(self) -> bool:
        return any(p["name"] == "mind" for p in self.parameters("query"))

    def resolve(self, node: dict) -> dict:
        while isinstance(node, dict) and "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            node = self.schema["components"]["schemas"].get(name) or \
                self.schema["components"].get("parameters", {}).get(name, {})
        return node

    def request_schema(self) -> dict | None:
        content = self.spec.get("requestBody", {}).get("content", {})
        for media_type, body in content.items():
            if "json" in media_type:
                return self.resolve(body.get("schema", {}))
        return None

    def example(self, node: dict, hints: dict, name: str | None = None, depth: int = 0):
        """A value that satisfies ``node`` (as far as it is cheap to), using ``hints`` by name."""
        node = self.resolve(node)
        if name in hints:
            return hints[name]
        for combinator in ("allOf", "oneOf", "anyOf"):
            if node.get(combinator):
                options = [self.resolve(option) for option in node[combinator]]
                if combinator == "allOf":
                    merged: dict = {"type": "object", "properties": {}, "required": []}
                    for option in options:
                        merged["properties"].update(option.get("properties", {}))
                        merged["required"] += option.get("required", [])
                    return self.example(merged, hints, name, depth)
                non_null = [o for o in options if o.get("type") != "null"] or options
                return self.example(non_null[0], hints, name, depth)
        if node.get("enum"):
            return next((value for value in node["enum"] if value is not None), None)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "object" or "properties" in node:
            if depth > 4:
                return {}
            properties = node.get("properties", {})
            wanted = set(node.get("required", [])) | (set(properties) & set(hints))
            return {prop: self.example(properties[prop], hints, prop, depth + 1)
                    for prop in properties if prop in wanted and
                    not self.resolve(properties[prop]).get("readOnly")}
        if kind == "array":
            item = self.example(node.get("items", {}), hints, None, depth + 1)
            return [item] * max(1, node.get("minItems", 1))
        if kind == "integer":
            return max(node.get("minimum", 1), 1)
        if kind == "number":
            return max(node.get("minimum", 0.5), 0.5)
        if kind == "boolean":
            return False
        if node.get("format") == "date-time":
            return "2020-01-01T00:00:00Z"
        text = "probe"
        return text.ljust(node.get("minLength", 0), "x")[:node.get("maxLength", 100)]


def operations(schema: dict) -> list[Operation]:
    found = []
    for path, methods in schema["paths"].items():
        for method, spec in methods.items():
            if method.upper() in {"GET", "POST", "PUT", "PATCH", "DELETE"}:
                found.append(Operation(method.upper(), path, spec, schema))
    return found
