"""Async HTTP client for the Synapse REST API, shared by the MCP tools and the CLI."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from synapse_client.provenance import (
    AGENT_HEADER,
    INSTANCE_HEADER,
    Provenance,
    check_agent,
    check_instance,
)

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "synapse-client/0.1"
# Progress callbacks get (bytes done, bytes in total or None when unknown).
Progress = Callable[[int, int | None], None]


class SynapseError(Exception):
    """The API refused a request (or could not be reached: ``status`` 0)."""

    def __init__(self, status: int, code: str, message: str, fields: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}

    def __str__(self) -> str:
        details = [f"{name}: {'; '.join(map(str, problems))}" if isinstance(problems, list)
                   else f"{name}: {problems}" for name, problems in self.fields.items()]
        # The message already names the first field; list the others too.
        extra = [detail for detail in details if detail not in self.message]
        text = self.message if not extra else f"{self.message} ({'; '.join(extra)})"
        return f"{text} [HTTP {self.status} {self.code}]" if self.status else text


class AuthError(SynapseError):
    """401 or 403: the Mind Key is missing, wrong, revoked, expired, or may not do this."""


class ConfigurationError(SynapseError):
    """The client is not configured (no key, malformed URL)."""

    def __init__(self, message: str):
        super().__init__(0, "configuration", message)


def error_from_response(response: httpx.Response) -> SynapseError:
    """The API's error shape → an exception; anything else → a plain description.

    Every error answer of the API (the one error shape ``{"error": {"status", "code",
    "message", "fields"?}}``) becomes a :class:`SynapseError` carrying the API's own
    message; the key itself never appears in a message.
    """
    status = response.status_code
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        fields = error.get("fields") if isinstance(error.get("fields"), dict) else None
    except (ValueError, KeyError, TypeError):
        code = "http_error"
        message = f"{status} {response.reason_phrase or 'error'} from {response.request.url.path}"
        fields = None
    if status == 429 and response.headers.get("Retry-After"):
        message += f" Retry after {response.headers['Retry-After']} seconds."
    # A full mind (403 quota_exceeded) is not a credentials problem.
    kind = AuthError if status in (401, 403) and code != "quota_exceeded" else SynapseError
    return kind(status, code, message, fields)


@dataclass(frozen=True)
class Recall:
    """``GET /memory/recall`` as JSON: the memories within the budget, most important first."""

    mind: dict
    memories: list[dict]
    tokens: int
    omitted: int
    # The low-priority memories the budget left out: {"count", "keys", "not_scanned"}.
    left_out_low: dict = field(default_factory=dict)


def _check_configuration(url: str, key: str) -> None:
    if not key:
        raise ConfigurationError(
            "No Mind Key: set SYNAPSE_MIND_KEY to a key (mk_…) of the mind to use.")
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"SYNAPSE_URL must start with http:// or https://, not {url!r}.")


def _params(**values: Any) -> dict:
    return {name: value for name, value in values.items() if value is not None}


class SynapseClient:
    """One Mind Key talking to one Synapse server.

    ``transport`` lets the server itself reuse this client in-process (``/mcp`` passes an
    ``httpx.ASGITransport`` over the Django app); ``headers`` are sent with every request,
    and so are the ``provenance`` headers (``X-Synapse-Agent``, ``-Agent-Instance``,
    ``-Device``) when given: :meth:`from_env` gives them for the CLI and ``synapse-mcp``.
    """

    def __init__(self, url: str, key: str, *, transport: httpx.AsyncBaseTransport | None = None,
                 headers: dict[str, str] | None = None, timeout: float = 60.0,
                 provenance: Provenance | None = None):
        _check_configuration(url, key)
        self.url = url.rstrip("/")
        self.provenance = provenance
        self._http = httpx.AsyncClient(
            base_url=self.url + "/", transport=transport, timeout=timeout,
            headers={"Authorization": f"Bearer {key}", "User-Agent": USER_AGENT,
                     "Accept": "application/json",
                     **(provenance.headers() if provenance else {}), **(headers or {})})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, *,
                 program: str = "synapse-cli") -> SynapseClient:
        """From ``SYNAPSE_URL`` (default ``http://127.0.0.1:8000``) and ``SYNAPSE_MIND_KEY``
        (``mk_…``), sending the provenance headers of ``program``
        (:meth:`Provenance.from_env <synapse_client.provenance.Provenance.from_env>`:
        ``SYNAPSE_AGENT``, ``SYNAPSE_AGENT_INSTANCE_ID``, ``SYNAPSE_DEVICE``)."""
        environ = os.environ if environ is None else environ
        url, key = environ.get("SYNAPSE_URL") or DEFAULT_URL, environ.get(
            "SYNAPSE_MIND_KEY", "").strip()
        _check_configuration(url, key)  # before the config folder is touched
        return cls(url, key, provenance=Provenance.from_env(program, environ))

    def use_agent(self, agent: str) -> None:
        """Name the agent in every later request (``synapse-mcp``, once the MCP client has
        said its name)."""
        self._http.headers[AGENT_HEADER] = check_agent(agent, setting="the agent name")

    async def __aenter__(self) -> SynapseClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = await self._http.request(method, path.lstrip("/"), **kwargs)
        except httpx.TimeoutException as error:
            raise SynapseError(0, "timeout", f"Synapse at {self.url} did not answer in "
                               "time.") from error
        except httpx.HTTPError as error:
            raise SynapseError(0, "unreachable", f"Cannot reach Synapse at {self.url}: "
                               f"{error.__class__.__name__}.") from error
        if response.status_code >= 400:
            raise error_from_response(response)
        if response.is_redirect:
            # Typically http:// to a server that insists on https://: say where to point.
            raise SynapseError(response.status_code, "redirect", "Synapse answered with a "
                               f"redirect to {response.headers.get('Location')}; set "
                               "SYNAPSE_URL to that server address.")
        return response

    async def _json(self, method: str, path: str, **kwargs) -> Any:
        response = await self._send(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as error:
            raise SynapseError(response.status_code, "bad_response", f"Synapse answered "
                               f"{path} with something that is not JSON.") from error

    # -- Core ---------------------------------------------------------------------------

    async def recall(self, *, query: str | None = None, budget: int | None = None,
                     category: str | None = None, tag: str | None = None,
                     path: str | None = None, memory_type: str | None = None) -> Recall:
        body = await self._json("GET", "/memory/recall", params=_params(
            q=query, budget=budget, category=category, tag=tag, path=path,
            memory_type=memory_type, format="json"))
        return Recall(mind=body.get("mind", {}), memories=body.get("memories", []),
                      tokens=body.get("tokens", 0), omitted=body.get("omitted", 0),
                      left_out_low=body.get("left_out_low") or {})

    async def recall_text(self, *, query: str | None = None, budget: int | None = None,
                          category: str | None = None, tag: str | None = None,
                          path: str | None = None, memory_type: str | None = None) -> str:
        response = await self._send("GET", "/memory/recall", headers={"Accept": "text/plain"},
                                    params=_params(q=query, budget=budget, category=category,
                                                   tag=tag, path=path,
                                                   memory_type=memory_type))
        return response.text

    async def remember(self, *, category: str, content: str, key: str | None = None,
                       tags: list[str] | None = None, priority: str | None = None,
                       confidence: float | None = None, expires_at: str | int | None = None,
                       memory_type: str | None = None, path: str | None = None,
                       occurred_at: str | int | None = None,
                       idempotency_key: str | None = None, agent: str | None = None,
                       agent_instance: str | None = None) -> dict:
        """``POST /memory``. ``agent`` and ``agent_instance`` name another agent than the
        client's own for this one write (an event that says who it came from)."""
        body = _params(category=category, key=key, content=content, tags=tags,
                       priority=priority, confidence=confidence, expires_at=expires_at,
                       memory_type=memory_type, path=path, occurred_at=occurred_at)
        headers = {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if agent:
            headers[AGENT_HEADER] = check_agent(agent, setting="agent")
        if agent_instance:
            headers[INSTANCE_HEADER] = check_instance(agent_instance, setting="agent instance")
        return await self._json("POST", "/memory", json=body, headers=headers or None)

    async def list(self, **filters: Any) -> dict:
        return await self._json("GET", "/memory", params=_params(**filters))

    async def get(self, memory_id: str) -> dict:
        return await self._json("GET", f"/memory/{_memory_path(memory_id)}")

    async def update(self, memory_id: str, **fields: Any) -> dict:
        return await self._json("PUT", f"/memory/{_memory_path(memory_id)}", json=fields)

    async def forget(self, memory_id: str) -> dict:
        return await self._json("DELETE", f"/memory/{_memory_path(memory_id)}")

    async def health(self) -> dict:
        return await self._json("GET", "/memory/health")

    # -- Search, verification, lifecycle --------------------------------------------------

    async def search(self, *, query: str, mode: str = "keyword", limit: int | None = None,
                     category: str | None = None, tag: str | None = None,
                     path: str | None = None, memory_type: str | None = None) -> dict:
        return await self._json("GET", "/memory/search", params=_params(
            q=query, mode=mode, limit=limit, category=category, tag=tag, path=path,
            memory_type=memory_type))

    async def timeline(self, *, path: str | None = None, after: str | None = None,
                       before: str | None = None, limit: int | None = None) -> dict:
        """``GET /memory/timeline``: one page of the episodes at exactly ``path``, in the
        order they happened. ``after``/``before`` take a memory id or an RFC 3339 time."""
        return await self._json("GET", "/memory/timeline", params=_params(
            path=path, after=after, before=before, limit=limit))

    async def neighbours(self, memory_id: str, *, n: int | None = None) -> dict:
        """``GET /memory/{id}/neighbours``: the episodes just before and after one episode
        on its path's timeline."""
        return await self._json("GET", f"/memory/{_memory_path(memory_id)}/neighbours",
                                params=_params(n=n))

    async def restore(self, memory_id: str) -> dict:
        return await self._json("POST", f"/memory/{_memory_path(memory_id)}/restore")

    async def unverified(self, *, limit: int | None = None) -> dict:
        return await self._json("GET", "/memory/unverified", params=_params(limit=limit))

    async def stats(self, *, path: str | None = None, memory_type: str | None = None) -> dict:
        return await self._json("GET", "/memory/stats", params=_params(
            path=path, memory_type=memory_type))

    async def export(self, *, format: str = "json", path: str | None = None,
                     progress: Progress | None = None) -> AsyncIterator[bytes]:
        """Stream ``GET /memory/mind-export`` (a full backup, or the memories under
        ``path``), reporting bytes received."""
        request = self._http.build_request("GET", "memory/mind-export",
                                           params=_params(format=format, path=path))
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as error:
            raise SynapseError(0, "unreachable", f"Cannot reach Synapse at {self.url}: "
                               f"{error.__class__.__name__}.") from error
        try:
            if response.status_code >= 400:
                await response.aread()
                raise error_from_response(response)
            total = int(response.headers["Content-Length"]) if response.headers.get(
                "Content-Length", "").isdigit() else None
            done = 0
            try:
                async for chunk in response.aiter_bytes():
                    done += len(chunk)
                    if progress:
                        progress(done, total)
                    yield chunk
            except httpx.HTTPError as error:
                raise SynapseError(0, "interrupted", f"The export from {self.url} broke off "
                                   f"after {done} bytes: {error.__class__.__name__}; nothing "
                                   "complete was received.") from error
        finally:
            await response.aclose()

    async def import_(self, payload: bytes, *, content_type: str = "application/json",
                      progress: Progress | None = None, chunk_size: int = 256 * 1024) -> dict:
        """``POST /memory/mind-import`` with a backup made by :meth:`export`."""

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(payload), chunk_size):
                yield payload[start:start + chunk_size]
                if progress:
                    progress(min(start + chunk_size, len(payload)), len(payload))

        return await self._json("POST", "/memory/mind-import", content=chunks(),
                                headers={"Content-Type": content_type,
                                         "Content-Length": str(len(payload))})


def _memory_path(memory_id: str) -> str:
    """A memory id as a path segment; anything that is not an id is refused here."""
    memory_id = memory_id.strip()
    if not memory_id.startswith("mem_") or not memory_id[4:].isalnum():
        raise SynapseError(0, "invalid", f"{memory_id!r} is not a memory id (mem_…).")
    return memory_id
