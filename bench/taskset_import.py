"""Task import at size: a 100,000-row CSV, scanned (the preview) and imported.

Run: ``python bench/taskset_import.py`` (``--rows N`` for another size). Prints
rows/second for the preview pass and for the full import (check pass + write
pass into SQLite in batches), the peak Python heap of each (tracemalloc, a
separate measured pass: tracemalloc slows the code it watches) and the
process's peak RSS. Target: the heap stays bounded — a few
MB per 100,000 rows for ids and split bookkeeping, never the whole file.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scratch

DATA_DIR = scratch.setup("import")

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.management import call_command

from optimizer.models import TaskSet
from optimizer.tasksets.services import taskset_import, taskset_import_preview


def write_csv(path: Path, rows: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "question", "answer", "topic", "difficulty"])
        for i in range(rows):
            writer.writerow(
                [
                    f"q{i:06d}",
                    f"Customer {i} asks: can I return item #{i % 977}, bought {i % 60} days ago, "
                    "without a receipt? They also mention the box is open.",
                    f"answer {i % 13}",
                    ("returns", "shipping", "billing")[i % 3],
                    i % 5,
                ]
            )


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(label: str, rows: int, size: int, work) -> None:
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    work()
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"{label:<34} {rows / seconds:>10,.0f} rows/s  {seconds:6.1f} s  "
        f"peak heap {heap_peak / 2**20:6.1f} MB (file {size / 2**20:.1f} MB)  peak RSS so far {peak_rss_mb():6.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    rows = parser.parse_args().rows
    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create(username="bench")
    path = Path(DATA_DIR) / "big.csv"
    write_csv(path, rows)
    size = path.stat().st_size
    print(f"{rows:,} rows, {size / 2**20:.1f} MB CSV; RSS after setup {peak_rss_mb():.1f} MB")

    def preview():
        with path.open("rb") as handle:
            report = taskset_import_preview(
                owner=owner, name="Big", filename=path.name, content=handle
            )
        assert report.ok and report.report.total == rows, report.problems[:3]

    def import_fresh():
        TaskSet.objects.filter(owner=owner, name="Big").delete()
        with path.open("rb") as handle:
            _, counts = taskset_import(owner=owner, name="Big", filename=path.name, content=handle)
        assert counts["created"] == rows

    measure("preview (one check pass)", rows, size, preview)
    measure("import (check + write, new set)", rows, size, import_fresh)


if __name__ == "__main__":
    main()
