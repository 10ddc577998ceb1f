"""Import benchmark: the peak resident memory of one server worker while it restores a
JSON export (POST /memory/mind-import) over real HTTP, and the time it takes.

    .venv/bin/python bench/import_rss.py [--memories 100000] [--label after]

A mind of ``--memories`` memories (two versions each, one in twenty in the trash, as
bench/export.py fills it) is exported in-process to a file, then uploaded from that file
to gunicorn (synapse/gunicorn_conf.py, one worker) for an empty mind. Before the upload
the worker's peak resident set (VmHWM) is reset to its current size through
/proc/<pid>/clear_refs, so the peak read afterwards is the import's own. The script runs
on any checkout (it needs nothing from the code it measures beyond the HTTP API), so the
same file measures main and a branch. Appends a row to bench/results/import_rss.md.
"""

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, Server, machine_line, setup_django, teardown  # noqa: E402
from bench.export import current_rss_mib, fill, peak_rss_mib, worker_pid  # noqa: E402


def reset_peak(pid: int) -> None:
    """Make VmHWM start again from the current resident set (Linux ≥ 4.0)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--label", default=os.environ.get("BENCH_LABEL", "this checkout"))
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "bench/results/import_rss.md"))
    args = parser.parse_args()

    # Checkouts from before the import had its own rate limit ignore these (bench/common
    # lifts the others).
    for scope in ("SYNC", "IMPORT", "RECALL"):
        os.environ.setdefault(f"SYNAPSE_RATE_{scope}", "100000000/min")
    os.environ.setdefault("SYNAPSE_IMPORT_MAX_BODY_BYTES", str(2**31))
    data_dir = setup_django()
    try:
        run(args)
    finally:
        teardown(data_dir, args.keep_data)


def run(args) -> None:
    import httpx
    from django.contrib.auth import get_user_model

    from memories.export import export_json
    from minds.services import key_issue, mind_create

    owner = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    source = mind_create(owner=owner, name="Bench source")
    print(f"filling {args.memories:,} memories …", flush=True)
    fill(source, args.memories, random.Random(11))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                     encoding="utf-8") as document:
        for piece in export_json(mind=source, reveal=True):
            document.write(piece)
    size = Path(document.name).stat().st_size
    target = mind_create(owner=owner, name="Bench restore")
    _key, plaintext = key_issue(mind=target, name="bench")
    headers = {"Authorization": f"Bearer {plaintext}"}

    server = Server(workers=1)
    try:
        server.wait("/memory/health", headers)
        worker = worker_pid(server.process.pid)
        httpx.get(f"{server.url}/memory/stats", headers=headers, timeout=60)
        idle = current_rss_mib(worker)
        reset_peak(worker)
        print(f"importing {size / 1e6:.0f} MB (worker idle at {idle:.0f} MiB) …", flush=True)
        started = time.perf_counter()
        with open(document.name, "rb") as body:
            response = httpx.post(f"{server.url}/memory/mind-import", content=body,
                                  timeout=3600, headers={
                                      **headers, "Content-Type": "application/json",
                                      "Content-Length": str(size)})
        seconds = time.perf_counter() - started
        peak = peak_rss_mib(worker)
    finally:
        server.stop()
        os.unlink(document.name)
    assert response.status_code == 200, response.text[:500]
    counts = response.json()
    print(f"{args.label}: {seconds:.1f} s, peak {peak:.0f} MiB ({peak - idle:+.0f} MiB over "
          f"idle), {counts}", flush=True)

    output = Path(args.output)
    if not output.exists():
        output.write_text(
            "# Import benchmark: peak memory of one worker\n\n"
            "POST /memory/mind-import of a JSON export into an empty mind, over HTTP, "
            "gunicorn with synapse/gunicorn_conf.py and one worker, embedded PostgreSQL. "
            "Peak = the worker's VmHWM, reset to its resident set just before the upload. "
            "Data as bench/export.py fills it: two versions per memory, one memory in "
            "twenty in the trash. Run with `bench/import_rss.py --memories N --label L` "
            "on each checkout.\n\n"
            "| checkout | when | memories | versions | MB | seconds | idle MiB | peak MiB "
            "| over idle MiB |\n|---|---|---|---|---|---|---|---|---|\n", encoding="utf-8")
    with output.open("a", encoding="utf-8") as report:
        report.write(f"| {args.label} | {machine_line()} | {counts['memories']:,} | "
                     f"{counts['versions']:,} | {size / 1e6:.1f} | {seconds:.1f} | "
                     f"{idle:.0f} | {peak:.0f} | {peak - idle:.0f} |\n")


if __name__ == "__main__":
    main()
