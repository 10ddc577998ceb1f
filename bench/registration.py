"""Registration timing: does ``POST /auth/register`` take as long for a taken username as
for a free one? (Both answer the same 201 and body; a faster refusal would still tell.)

    .venv/bin/python bench/registration.py [--requests 20] [--keep-data]

In-process through Django's test client on a fresh embedded database, alternating taken
and free names so both see the same machine load. Writes bench/results/registration.md.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, Stats, machine_line, setup_django, teardown  # noqa: E402

PASSWORD = "correct horse battery staple"  # noqa: S105 (a throwaway account)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--keep-data", action="store_true")
    args = parser.parse_args()
    data_dir = setup_django()
    try:
        import time

        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        get_user_model().objects.create_user("taken", password=PASSWORD)
        client = APIClient()
        samples = {"taken": [], "free": []}
        for index in range(args.requests + 2):  # the first two warm up
            for kind, username in (("taken", "TAKEN"), ("free", f"free{index}")):
                started = time.perf_counter()
                response = client.post("/auth/register", {"username": username,
                                                          "password": PASSWORD}, format="json")
                elapsed = (time.perf_counter() - started) * 1000
                assert response.status_code == 201, response.content
                if index >= 2:
                    samples[kind].append(elapsed)
        taken, free = Stats("taken username", samples["taken"]), Stats("free username",
                                                                        samples["free"])
        lines = ["# Registration timing", "",
                 f"Machine: {machine_line()}. In-process (Django test client), embedded "
                 f"PostgreSQL; {args.requests} requests of each kind, alternating, after 2 "
                 "warm-ups. Both answer 201 with the same body.", "",
                 "| username | n | p50 ms | p95 ms |", "|---|---|---|---|"]
        lines += [f"| {stats.name} | {len(stats.samples_ms)} | {stats.p50:.1f} | "
                  f"{stats.pct(95):.1f} |" for stats in (taken, free)]
        lines += ["", f"p50 difference: {abs(taken.p50 - free.p50):.1f} ms "
                      f"({abs(taken.p50 - free.p50) / free.p50 * 100:.0f} % of a free name's "
                      "time): the taken path hashes the password too."]
        report = "\n".join(lines) + "\n"
        (ROOT / "bench" / "results" / "registration.md").write_text(report, encoding="utf-8")
        print(report)
    finally:
        teardown(data_dir, args.keep_data)


if __name__ == "__main__":
    main()
