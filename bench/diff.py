"""UI diff benchmark: worst-case time of the memory page's content diff
(memories.diff.content_diff) on adversarial versions, before and after its bound.

    .venv/bin/python bench/diff.py [--before PATH] [--before-max-lines 1000]

``--before`` names a tree of the code to compare with (e.g. ``git archive <commit> | tar
-x -C PATH``); each tree runs in its own process. The unbounded matcher is cubic on
repetitive lines, so the "before" tree only gets the sizes up to --before-max-lines.
Writes bench/results/diff.md. In-process, no database: the diff is the costly part of the
page view, and its result is bounded in size by the same limits.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_CONTENT = 50_000  # characters per version (memories.api.serializers.MAX_CONTENT)


def cases(max_lines: int):
    """(family, lines per version, old, new): each version at most MAX_CONTENT chars."""
    for lines in (250, 500, 1000, 2000, 4000, 25_000):
        if lines > max_lines:
            continue
        yield "x lines vs alternating x/y lines", lines, "x\n" * lines, "x\ny\n" * (lines // 2)
        yield "every line changed (a → b)", lines, "a\n" * lines, "b\n" * lines
        yield ("three-letter random lines", lines,
               "".join("abc"[(i * 7) % 3] + "\n" for i in range(lines)),
               "".join("abc"[(i * 5 + i // 3) % 3] + "\n" for i in range(lines)))
    words = MAX_CONTENT // 4
    yield "one line: x words vs x y words", 1, "x " * words, ("x y " * (words // 2))[:MAX_CONTENT]
    prose = "".join(f"Line {i} says something about item {i}.\n" for i in range(1200))
    yield ("prose, a few lines edited", 1200, prose[:MAX_CONTENT],
           prose.replace("something about item 7", "something else about item 7")[:MAX_CONTENT])


def worker(code_root: str, max_lines: int) -> None:
    """Time each case with the content_diff of ``code_root``; JSON lines on stdout."""
    sys.path.insert(0, code_root)
    os.environ["DATABASE_URL"] = "postgres://bench@127.0.0.1:1/unused"  # never connected
    os.environ.setdefault("SYNAPSE_DATA_DIR", tempfile.mkdtemp(prefix="synapse-bench-diff-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "synapse.settings"
    import django

    django.setup()
    try:
        import memories.diff as views
    except ImportError:  # a tree from before memories/diff.py: the diff lived in the views
        import memories.views as views

    bounded = getattr(views, "DiffTooCostly", None)
    for family, lines, old, new in cases(max_lines):
        assert len(old) <= MAX_CONTENT and len(new) <= MAX_CONTENT
        start = time.perf_counter()
        try:
            views.content_diff(old, new)
            shown = "diff"
        except Exception as error:  # noqa: BLE001 - only the bound's own exception
            if bounded is None or not isinstance(error, bounded):
                raise
            shown = "side by side"
        print(json.dumps({"family": family, "lines": lines, "chars": len(old) + len(new),
                          "seconds": time.perf_counter() - start, "shown": shown}), flush=True)


def run(code_root: str, max_lines: int) -> list[dict]:
    result = subprocess.run([sys.executable, __file__, "--worker", code_root,
                             "--max-lines", str(max_lines)],
                            capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="a tree of the code before the bound")
    parser.add_argument("--before-max-lines", type=int, default=1000)
    parser.add_argument("--worker")
    parser.add_argument("--max-lines", type=int, default=25_000)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.max_lines)
        return
    after = run(str(ROOT), 25_000)
    before = {(r["family"], r["lines"]): r
              for r in (run(args.before, args.before_max_lines) if args.before else [])}
    rows = ["| case | lines | chars | before s | after s | after shows |",
            "|---|---|---|---|---|---|"]
    for r in after:
        was = before.get((r["family"], r["lines"]))
        before_seconds = f"{was['seconds']:.3f}" if was else "not run"
        rows.append(f"| {r['family']} | {r['lines']:,} | {r['chars']:,} | {before_seconds} | "
                    f"{r['seconds']:.3f} | {r['shown']} |")
    worst_after = max(after, key=lambda r: r["seconds"])
    worst_before = max(before.values(), key=lambda r: r["seconds"]) if before else None
    report = [
        "# UI diff benchmark",
        "",
        f"Machine: {platform.node()} · {os.cpu_count()} cores · Python "
        f"{platform.python_version()} · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "`memories.diff.content_diff` in-process on two versions of at most 50,000 "
        "characters each; before = the unbounded SequenceMatcher (autojunk off), after = "
        "the bounded diff (work budget, line and character caps, side-by-side fallback).",
        "",
        *rows,
        "",
        f"Worst after: {worst_after['seconds']:.3f} s ({worst_after['family']}, "
        f"{worst_after['lines']:,} lines)."
        + (f" Worst before (sizes run): {worst_before['seconds']:.1f} s "
           f"({worst_before['family']}, {worst_before['lines']:,} lines); the unbounded "
           "matcher grows with the cube of the lines on these inputs, so the larger sizes "
           "were not run before." if worst_before else ""),
        "",
    ]
    out = ROOT / "bench" / "results" / "diff.md"
    out.write_text("\n".join(report), encoding="utf-8")
    print("\n".join(report))


if __name__ == "__main__":
    main()
