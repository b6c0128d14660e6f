"""Load on a served run: concurrent clients sending good and over-budget requests for a while.

Usage: python benchmarks/load_test.py [--root .] [--run transformer] [--run lstm_lm]
                                      [--clients 8] [--seconds 60]
                                      [--out benchmarks/results/load_test.json]

Each run's champion (`models:/nlpzoo-RUN@champion` of the project's store at `--root`) is
served by `mlflow models serve --env-manager local --workers 1` on 127.0.0.1 and a free port
(`benchmarks/bad_requests.py`'s `Served`), with the serving limits at their defaults. Then
`--clients` threads send requests back to back for `--seconds`, each picking in turn from a
mix of good requests (one sentence or prompt, a few lines) and requests over a limit (too many
lines, too long a source or prompt, too wide a beam, too many new tokens), pausing 0.25 s after
a 429 (the server answering as many requests as it may), while a monitor
samples the server's resident memory (VmRSS of its processes) and asks `/ping` every second.

Reported per run: the answers by status, the slowest answer against the deadline (the served
limit on a request's work, + 1 s), 5xx answers (none expected: over-budget requests are 400,
a request beyond the concurrent limit is 429), the resident memory after the first ten seconds
and at its largest later (flat within 10 % expected), and `/ping`'s answers. The figures depend
on the machine's load: run it on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bad_requests import Served, body, group_pids, machine

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "load_test.json"
JSON = "application/json"
BACK_OFF_S = 0.25  # a client's pause after a 429 (busy)


def mix(task: str) -> list[tuple[str, bytes]]:
    """(kind, request body) pairs the clients take in turn."""
    if task == "mt":
        good = "Ein Hund läuft über die Wiese."
        lines = [
            "Zwei Männer stehen vor einem Haus.",
            "Ein kleines Mädchen spielt im Sand.",
            "Eine Frau fährt Fahrrad.",
            good,
        ]
        return [
            ("good: one line, beam 5", body([good])),
            ("good: four lines, beam 5", body(lines)),
            ("good: greedy", body([good], {"beam_size": 1})),
            ("over: 65 lines", body([good] * 65)),
            ("over: a 400-word line", body([" ".join(["Hund"] * 400)])),
            ("over: beam 17", body([good], {"beam_size": 17})),
        ]
    prompt = "the jury said"
    return [
        ("good: 20 new tokens", body([prompt], {"tokens": 20})),
        ("good: three prompts", body([prompt, "in the city", "he said that"], {"tokens": 10})),
        ("over: 5,000 new tokens", body([prompt], {"tokens": 5000})),
        ("over: a 3,000-word prompt", body([" ".join(["the"] * 3000)], {"tokens": 1})),
        ("over: 65 prompts", body([prompt] * 65, {"tokens": 1})),
    ]


def rss(pgid: int) -> int:
    """Resident bytes of the server's processes (VmRSS summed)."""
    total = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def load(served: Served, requests: list[tuple[str, bytes]], clients: int, seconds: float) -> dict:
    stop = time.monotonic() + seconds
    answers: list[dict] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        k = i
        while time.monotonic() < stop:
            kind, data = requests[k % len(requests)]
            k += 1
            t0 = time.monotonic()
            status, content = served.ask(data, JSON)
            took = time.monotonic() - t0
            message = ""
            if status != 200:
                with contextlib.suppress(ValueError, AttributeError):
                    message = json.loads(content).get("message", "")[:120]
            with lock:
                answers.append({"kind": kind, "status": status, "s": took, "message": message})
            if status == 429:  # busy: a client backs off before asking again
                time.sleep(BACK_OFF_S)

    samples: list[dict] = []

    def monitor() -> None:
        t_start = time.monotonic()
        while time.monotonic() < stop:
            t0 = time.monotonic()
            try:
                r = served.requests.get(f"{served.url}/ping", timeout=5)
                ping = r.status_code
            except served.requests.RequestException:
                ping = 0
            samples.append(
                {
                    "t": round(t0 - t_start, 1),
                    "rss": rss(served.proc.pid),
                    "ping": ping,
                    "ping_s": round(time.monotonic() - t0, 3),
                }
            )
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    threads.append(threading.Thread(target=monitor))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"answers": answers, "samples": samples}


def summarise(found: dict, deadline_s: float) -> dict:
    answers, samples = found["answers"], found["samples"]
    by_kind: dict[str, Counter] = {}
    slowest: dict[str, float] = {}
    for a in answers:
        by_kind.setdefault(a["kind"], Counter())[str(a["status"])] += 1
        slowest[a["kind"]] = max(slowest.get(a["kind"], 0.0), a["s"])
    settled = [s["rss"] for s in samples if s["t"] >= 10]
    first = settled[0] if settled else None
    peak = max(settled) if settled else None
    statuses = Counter(str(a["status"]) for a in answers)
    return {
        "requests": len(answers),
        "statuses": dict(statuses),
        "server_errors": sum(n for s, n in statuses.items() if s.startswith("5") or s == "0"),
        "slowest_s": round(max((a["s"] for a in answers), default=0.0), 2),
        "deadline_plus_1_s": deadline_s + 1,
        "over_deadline": sum(a["s"] > deadline_s + 1 for a in answers),
        "by_kind": {
            k: {"statuses": dict(c), "slowest_s": round(slowest[k], 2)} for k, c in by_kind.items()
        },
        "rss_at_10s_mb": round(first / 2**20, 1) if first else None,
        "rss_peak_after_10s_mb": round(peak / 2**20, 1) if peak else None,
        "rss_growth": round(peak / first - 1, 3) if first else None,
        "ping": dict(Counter(str(s["ping"]) for s in samples)),
        "ping_slowest_s": max((s["ping_s"] for s in samples), default=None),
        "examples": {
            a["kind"]: a["message"] for a in answers if a["status"] not in (200,) and a["message"]
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this)")
    parser.add_argument("--run", action="append", help="runs to serve (transformer, lstm_lm)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from nlpzoo.use.limits import serving_limits

    root = args.root.resolve()
    uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{root / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri
    # MLflow starts uvicorn from PATH: this interpreter's environment first
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    limits = serving_limits()
    deadline_s = float(limits.seconds or 0.0)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "clients": args.clients,
        "seconds": args.seconds,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "runs": {},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for run in args.run or ["transformer", "lstm_lm"]:
        model_uri = f"models:/nlpzoo-{run}@champion"
        from bad_requests import task_of

        task = task_of(model_uri)
        served = Served(model_uri, env, args.out.with_name(f"load_test.{run}.server.log"))
        try:
            found = load(served, mix(task), args.clients, args.seconds)
            still = served.alive()
        finally:
            served.stop()
        summary = summarise(found, deadline_s)
        summary["answers_after"] = still
        result["runs"][run] = summary
        print(run, json.dumps({k: v for k, v in summary.items() if k != "by_kind"}))
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
