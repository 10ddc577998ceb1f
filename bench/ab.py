"""Two checkouts side by side: the same requests to both, alternating, in one run.

    .venv/bin/python bench/ab.py --before /path/to/older/checkout \\
        [--memories 3000] [--requests 600] [--url "/memory/recall?budget=2000" …]

Sequential runs of one benchmark on two trees move by a few milliseconds with the machine;
here both servers (one gunicorn worker each, Synapse's production configuration) run at
once on one database filled once, and each request goes to one and then the other, so
whatever the machine does falls on both alike. The older checkout must run on this
database's schema (its migrations a prefix of this tree's) and on this virtualenv (make a
worktree: ``git worktree add /tmp/before <commit>``). Prints p50/p95/p99 per URL and tree;
writes nothing.
"""

import argparse
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    HttpClient,
    Server,
    Stats,
    setup_django,
    teardown,
    timed,
)
from bench.core import fill  # noqa: E402

URLS = ["/memory/recall?budget=2000", "/memory/recall", "/memory?limit=50"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="the older checkout")
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=600, help="per URL and tree")
    parser.add_argument("--url", action="append", help=f"default: {', '.join(URLS)}")
    args = parser.parse_args()

    data_dir = setup_django()
    from django.contrib.auth import get_user_model

    from minds.services import key_issue, mind_create

    owner = get_user_model().objects.create_user("ab", password=uuid.uuid4().hex)
    mind = mind_create(owner=owner, name="A/B")
    fill(mind, args.memories, random.Random(7))
    _key, plain = key_issue(mind=mind, name="ab")
    headers = {"Authorization": f"Bearer {plain}"}
    servers = {"before": Server(workers=1, tree=args.before.resolve()),
               "this tree": Server(workers=1)}
    try:
        for server in servers.values():
            server.wait("/memory/health", headers)
        clients = {name: HttpClient(server.url)
                   for name, server in servers.items()}
        for url in args.url or URLS:
            def fetch(client, url=url):
                client.get(url, headers=headers).raise_for_status()

            for client in clients.values():
                timed(lambda _i, c=client: fetch(c), 30)  # warm-up
            samples = {name: [] for name in clients}
            for _ in range(args.requests):  # one pair at a time: A then B, timed apart
                for name, client in clients.items():
                    samples[name] += timed(lambda _i, c=client: fetch(c), 1)
            for name, values in samples.items():
                stats = Stats(f"{url} — {name}", values)
                print(f"{stats.name}: p50 {stats.p50:.2f} p95 {stats.pct(95):.2f} "
                      f"p99 {stats.pct(99):.2f} ms", flush=True)
    finally:
        for server in servers.values():
            server.stop()
        teardown(data_dir, False)


if __name__ == "__main__":
    main()
