"""``synapse``: the command line (recall, remember, remember-event, search, timeline, get,
forget, restore, export, import, stats) over the REST API, configured by ``SYNAPSE_URL``
and ``SYNAPSE_MIND_KEY``."""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from synapse_client.events import EVENT_TYPES, normalize_agent_event, to_memory_candidate
from synapse_client.provenance import ProvenanceError
from synapse_client.rest import DEFAULT_URL, AuthError, SynapseClient, SynapseError
from synapse_client.text import (
    cite,
    format_memory,
    format_neighbours,
    format_recall,
    format_stats,
    format_timeline,
    inline,
)

# Exit codes (EPILOG tells the user): 0 success; 1 the API refused the request, could not
# be reached, the client is not configured, or an event is refused; 2 bad command-line usage
# or an invalid SYNAPSE_AGENT / SYNAPSE_AGENT_INSTANCE_ID / SYNAPSE_DEVICE; 3 the Mind Key is
# missing, wrong, revoked, expired or not allowed to do this (HTTP 401/403); 130 interrupted.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_AUTH, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
CATEGORIES = ["identity", "preference", "fact", "project", "skill", "mistake", "context",
              "note", "credentials"]
PRIORITIES = ["low", "normal", "high", "critical"]
MEMORY_TYPES = ["semantic", "episodic", "procedural", "working", "identity"]
PATH_HELP = "lower-case segments joined by '/', e.g. projects/memory-os/decisions"

EPILOG = """\
environment:
  SYNAPSE_URL        the Synapse server (default http://127.0.0.1:8000)
  SYNAPSE_MIND_KEY   a Mind Key (mk_...) of the mind to use
  SYNAPSE_AGENT      the agent's name, sent as X-Synapse-Agent on every request
                     (1-64 of A-Z a-z 0-9 . _ -; default synapse-cli)
  SYNAPSE_AGENT_INSTANCE_ID
                     this installation's id, X-Synapse-Agent-Instance (1-64 of
                     A-Z a-z 0-9 . _ -; default: made once, kept in the config folder)
  SYNAPSE_DEVICE     X-Synapse-Device, at most 200 characters (default
                     "<host>; <OS> <release>; synapse-cli/<version>"; empty: none)
  SYNAPSE_CONFIG_DIR the config folder (default $XDG_CONFIG_HOME/synapse or
                     ~/.config/synapse)

exit codes:
  0  success
  1  the API refused the request, the server could not be reached, no key is set, or
     remember-event refused an event
  2  bad command-line usage, or an invalid SYNAPSE_AGENT, SYNAPSE_AGENT_INSTANCE_ID or
     SYNAPSE_DEVICE
  3  the Mind Key is missing, wrong, revoked, expired or not allowed to do this
"""


# -- Output -------------------------------------------------------------------------------

def _emit_json(value) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def table(rows: list[list[str]], headers: list[str]) -> str:
    """Columns sized to their content; the last column is cut to the terminal width."""
    rows = [[_one_line(cell) for cell in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]
    fixed = sum(widths[:-1]) + 2 * (len(headers) - 1)
    room = max(20, shutil.get_terminal_size((120, 24)).columns - fixed)
    widths[-1] = min(widths[-1], room)

    def line(cells: list[str]) -> str:
        last = cells[-1] if len(cells[-1]) <= widths[-1] else cells[-1][:widths[-1] - 1] + "…"
        return "  ".join([*(cell.ljust(width) for cell, width in zip(cells[:-1], widths,
                                                                       strict=False)), last])

    return "\n".join([line(headers), line(["-" * width for width in widths]),
                      *(line(row) for row in rows)])


class ProgressReporter:
    """Bytes moved so far, on stderr: rewritten in place on a terminal, else a line per MiB."""

    def __init__(self, verb: str, enabled: bool):
        self.verb, self.enabled = verb, enabled
        self.tty = sys.stderr.isatty()
        self.reported = -1

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        step = done // (1 << 20)
        if not self.tty and step == self.reported and done != total:
            return
        self.reported = step
        amount = _size(done) + (f" of {_size(total)} ({done * 100 // total}%)" if total
                                else "")
        end = "\r" if self.tty else "\n"
        print(f"{self.verb} {amount}", end=end, file=sys.stderr, flush=True)

    def finish(self, message: str) -> None:
        if self.tty and self.enabled:
            print(" " * 60, end="\r", file=sys.stderr)
        print(message, file=sys.stderr)


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if count < 1024 or unit == "MiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


# -- Commands -----------------------------------------------------------------------------

async def cmd_recall(client: SynapseClient, args) -> None:
    result = await client.recall(query=args.query, budget=args.budget, category=args.category,
                                 tag=args.tag, path=args.path, memory_type=args.type)
    if args.json:
        _emit_json({"mind": result.mind, "tokens": result.tokens, "omitted": result.omitted,
                    "left_out_low": result.left_out_low, "memories": result.memories})
    else:
        print(format_recall(result.mind, result.memories, result.omitted, args.budget,
                            result.left_out_low), end="")


async def cmd_remember(client: SynapseClient, args) -> None:
    content = sys.stdin.read() if args.content == "-" else args.content
    result = await client.remember(category=args.category, content=content, key=args.key,
                                   tags=args.tag, priority=args.priority,
                                   confidence=args.confidence, expires_at=args.expires_at,
                                   memory_type=args.type, path=args.path,
                                   occurred_at=args.occurred_at)
    if args.json:
        _emit_json(result)
    else:
        print(f"{result['status']}  {cite(result)}")


def read_events(args) -> list[dict]:
    """The events of ``remember-event``: one JSON object, or one per line with --lines,
    each normalised and made a candidate; any bad one stops everything before a write."""
    text = sys.stdin.read() if args.event in (None, "-") else args.event
    if args.lines:
        numbered = [(number, line) for number, line in enumerate(text.splitlines(), 1)
                    if line.strip()]
    else:
        numbered = [(None, text)] if text.strip() else []
    if not numbered:
        raise SynapseError(0, "invalid_event", "No event given: pass one as JSON, or on "
                                               "stdin.")
    candidates = []
    for number, chunk in numbered:
        where = f"line {number}: " if number else ""
        try:
            event = json.loads(chunk)
            candidates.append(to_memory_candidate(normalize_agent_event(
                event, source=args.source, default_agent_id=args.agent)))
        except ValueError as error:  # json.JSONDecodeError is one
            message = (f"not JSON ({error})" if isinstance(error, json.JSONDecodeError)
                       else str(error))
            raise SynapseError(0, "invalid_event", f"{where}{message}") from None
    return candidates


async def cmd_remember_event(client: SynapseClient | None, args) -> None:
    candidates = read_events(args)
    if args.dry_run:
        _emit_json(candidates if args.lines else candidates[0])
        return
    answers = []
    for candidate in candidates:
        body = {name: value for name, value in candidate.items() if name != "provenance"}
        provenance = candidate.get("provenance", {})
        answer = await client.remember(**body, agent=provenance.get("agent"),
                                       agent_instance=provenance.get("instance"))
        answers.append(answer)
        if not args.json:
            citation = answer.get("citation") or f"{answer['id']}@v{answer.get('version')}"
            print(f"{answer['status']}  {citation}", flush=True)
    if args.json:
        _emit_json(answers if args.lines else answers[0])


async def cmd_search(client: SynapseClient, args) -> None:
    body = await client.search(query=args.query, mode=args.mode, limit=args.limit,
                               category=args.category, tag=args.tag, path=args.path,
                               memory_type=args.type)
    if args.json:
        _emit_json(body)
        return
    results = body.get("results", [])
    if not results:
        print(f"No memories match {args.query!r}.", file=sys.stderr)
        return
    rows = []
    for result in results:
        memory = result.get("memory", result)
        score = result.get("score", result.get("similarity"))
        rows.append([memory.get("id", ""), f"{memory.get('category')}/{memory.get('key')}",
                     f"{score:.3f}" if isinstance(score, int | float) else "",
                     result.get("snippet") or result.get("highlight") or memory.get("content",
                                                                                    "")])
    print(table(rows, ["ID", "CATEGORY/KEY", "SCORE", "TEXT"]))


async def cmd_timeline(client: SynapseClient, args) -> None:
    if args.around:
        body = await client.neighbours(args.around, n=args.limit)
        text = format_neighbours(body)
    else:
        body = await client.timeline(path=args.path, after=args.after, before=args.before,
                                     limit=args.limit or 20)
        text = format_timeline(body, after=args.after, before=args.before)
    if args.json:
        _emit_json(body)
    else:
        print(text)


async def cmd_get(client: SynapseClient, args) -> None:
    memory = await client.get(args.id)
    if args.json:
        _emit_json(memory)
    else:
        print(format_memory(memory, detail=True))


async def cmd_forget(client: SynapseClient, args) -> None:
    memory = await client.forget(args.id)
    if args.json:
        _emit_json(memory)
    else:
        memory_id = inline(memory.get("id"))
        print(f"trashed  {memory_id}  ({inline(memory.get('category'))}/"
              f"{inline(memory.get('key'))}); undo with: synapse restore {memory_id}")


async def cmd_restore(client: SynapseClient, args) -> None:
    memory = await client.restore(args.id)
    if args.json:
        _emit_json(memory)
    else:
        print(f"restored  {memory.get('id', args.id)}")


async def cmd_stats(client: SynapseClient, args) -> None:
    stats = await client.stats(path=args.path, memory_type=args.type)
    if args.json:
        _emit_json(stats)
        return
    print(format_stats(stats))


async def cmd_export(client: SynapseClient, args) -> None:
    progress = ProgressReporter("Exporting", args.progress)
    target = None if args.output in (None, "-") else Path(args.output)
    written = 0
    if target is None:
        async for chunk in client.export(format=args.format, path=args.path, progress=progress):
            sys.stdout.buffer.write(chunk)
            written += len(chunk)
        sys.stdout.buffer.flush()
        progress.finish(f"Exported {_size(written)}.")
        return
    # Written beside the target and renamed at the end: a failed export never leaves a
    # file that looks like a complete backup.
    descriptor, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            async for chunk in client.export(format=args.format, path=args.path, progress=progress):
                handle.write(chunk)
                written += len(chunk)
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise
    progress.finish(f"Exported {_size(written)} to {target}.")


async def cmd_import(client: SynapseClient, args) -> None:
    if args.file.endswith(".csv"):
        # CSV exports hold current memories only; a restore needs the full JSON backup.
        raise SynapseError(0, "usage", "import restores JSON backups: make one with "
                                       "`synapse export -o backup.json`.")
    payload = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    progress = ProgressReporter("Uploading", args.progress)
    result = await client.import_(payload, progress=progress)
    progress.finish(f"Imported {_size(len(payload))}.")
    if args.json:
        _emit_json(result)
    else:
        for name, value in result.items():
            print(f"{name}: {json.dumps(value) if isinstance(value, dict | list) else value}")


# -- Arguments ----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    # Accepted before or after the command; SUPPRESS keeps a subcommand's unset default
    # from overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the API's JSON answer")
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help=f"Synapse server (default $SYNAPSE_URL or {DEFAULT_URL})")

    parser = argparse.ArgumentParser(
        prog="synapse", description="Talk to a Synapse memory server with a Mind Key.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[common])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=help_text,
                                  description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    recall = command("recall", cmd_recall, "print what an agent recalls at session start")
    recall.add_argument("-q", "--query", help="rank by relevance to this text")
    recall.add_argument("--budget", type=int, help="at most this many tokens")
    recall.add_argument("--category", choices=CATEGORIES)
    recall.add_argument("--tag")
    recall.add_argument("--path", help="only this path and everything below it")
    recall.add_argument("--type", choices=MEMORY_TYPES, help="only memories of this type")

    remember = command("remember", cmd_remember, "store a memory (or update the one with the "
                       "same category and key)")
    remember.add_argument("category", choices=CATEGORIES)
    remember.add_argument("content", help="the memory text; - reads it from stdin")
    remember.add_argument("--key", help="stable snake_case key (derived when omitted)")
    remember.add_argument("--tag", action="append", help="a tag (repeat for more)")
    remember.add_argument("--priority", choices=PRIORITIES)
    remember.add_argument("--confidence", type=float)
    remember.add_argument("--expires-at", help="RFC 3339 timestamp or Unix epoch seconds")
    remember.add_argument("--path", help=f"where it belongs: {PATH_HELP} (default the root)")
    remember.add_argument("--type", choices=MEMORY_TYPES,
                          help="how it behaves (default semantic, identity for the identity "
                               "category); working expires after 24 h unless --expires-at")
    remember.add_argument("--occurred-at", help="when an episodic memory happened: RFC 3339 "
                                                "timestamp or Unix epoch seconds (default now)")

    event = command("remember-event", cmd_remember_event,
                    "store an agent event (a command run, a decision, a handoff, …) as a "
                    "memory")
    event.add_argument("event", nargs="?", help="the event as a JSON object; - or nothing "
                       "reads it from stdin")
    event.add_argument("--lines", action="store_true",
                       help="JSON lines: one event per line (blank lines skipped)")
    event.add_argument("--source", default="generic",
                       help="where the events come from, e.g. claude-code or codex "
                            "(default generic)")
    event.add_argument("--agent", help="the agent when an event names none (default "
                                       "$SYNAPSE_AGENT or synapse-cli)")
    event.add_argument("--dry-run", action="store_true",
                       help="print the memories it would store, as JSON, and store nothing")
    event.epilog = f"event types: {', '.join(EVENT_TYPES)} (docs/agents.md, Agent events)"

    search = command("search", cmd_search, "search memories")
    search.add_argument("query")
    search.add_argument("--mode", choices=["keyword", "semantic", "hybrid"], default="keyword")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--category", choices=CATEGORIES)
    search.add_argument("--tag")
    search.add_argument("--path", help="only this path and everything below it")
    search.add_argument("--type", choices=MEMORY_TYPES, help="only memories of this type")

    timeline = command("timeline", cmd_timeline, "episodic memories of a path in the order "
                       "they happened, oldest first")
    timeline.add_argument("path", nargs="?", help=f"the path ({PATH_HELP}); default the root")
    timeline.add_argument("--after", help="start just after this memory id or RFC 3339 time")
    timeline.add_argument("--before", help="end just before this memory id or RFC 3339 time")
    timeline.add_argument("--limit", type=int, help="at most this many episodes (default 20); "
                          "with --around, this many on each side (default 2)")
    timeline.add_argument("--around", metavar="ID", help="the episodes just before and after "
                          "this one (mem_…) on its own timeline")

    for name, handler, help_text in (
            ("get", cmd_get, "show one memory in full"),
            ("forget", cmd_forget, "move a memory to the trash"),
            ("restore", cmd_restore, "bring a memory back from the trash")):
        command(name, handler, help_text).add_argument("id", help="memory id (mem_…)")

    stats = command("stats", cmd_stats, "counts by category, priority, type and verification")
    stats.add_argument("--path", help="only this path and everything below it")
    stats.add_argument("--type", choices=MEMORY_TYPES, help="only memories of this type")

    export = command("export", cmd_export, "download a full backup of the mind")
    export.add_argument("-o", "--output", help="write to this file (default stdout)")
    export.add_argument("--format", choices=["json", "csv"], default="json")
    export.add_argument("--path", help="only this path and everything below it (default the "
                        "whole mind)")
    export.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        default=sys.stderr.isatty(),
                        help="show bytes transferred on stderr (default: on a terminal)")

    restore_backup = command("import", cmd_import, "restore a backup made by export")
    restore_backup.add_argument("file", help="backup file; - reads stdin")
    restore_backup.add_argument("--progress", action=argparse.BooleanOptionalAction,
                                default=sys.stderr.isatty(),
                                help="show bytes transferred on stderr (default: on a "
                                     "terminal)")
    return parser


async def run(args) -> None:
    if getattr(args, "dry_run", False):  # needs no server, key or config folder
        await args.handler(None, args)
        return
    environ = dict(os.environ)
    if args.url:
        environ["SYNAPSE_URL"] = args.url
    async with SynapseClient.from_env(environ, program="synapse-cli") as client:
        await args.handler(client, args)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "around", None) and (args.path is not None or args.after or args.before):
        parser.error("timeline --around reads the episode's own timeline: leave out PATH, "
                     "--after and --before")
    args.json = getattr(args, "json", False)
    args.url = getattr(args, "url", None)
    try:
        asyncio.run(run(args))
    except AuthError as error:
        print(f"synapse: {error}", file=sys.stderr)
        sys.exit(EXIT_AUTH)
    except ProvenanceError as error:
        print(f"synapse: {error}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except SynapseError as error:
        print(f"synapse: {error}", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            # `synapse export | head`: the reader left; not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_OK)
        print(f"synapse: {error.strerror or error}: {error.filename or ''}".rstrip(": "),
              file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
