"""Bad requests to a served run: what each is answered, how fast, and what the server holds.

Usage: python benchmarks/bad_requests.py [--root .] [--run transformer]
                                         [--model URI] [--in-process] [--per-kind 30]
                                         [--out benchmarks/results/bad_requests]
                                         [--sentence TEXT] [--prompt TEXT] [--word WORD]
       python benchmarks/bad_requests.py --markdown [--out ...]   (the tables of a saved result)

The model is loaded as `benchmarks/serving.py` loads it: `models:/nlpzoo-RUN@champion` of the
project's store (`--root`, `MLFLOW_TRACKING_URI` for another), or any MLflow model `--model`
names (a `models:/` URI, a `runs:/` URI, a local model folder). It is served by `mlflow models
serve --env-manager local --workers 1` on 127.0.0.1 and a free port (stopped at the end), or
with `--in-process` loaded here and asked through the scoring server's own request handler
(`mlflow.pyfunc.scoring_server.invocations`, what the server runs for each request).

At least `--per-kind` requests of each kind, built for the run's task (translation, language
model, word vectors), each sent as the same bytes either way:

    input types      numbers, null, booleans, lists and objects where the lines are strings
    empty            empty and blank lines, alone and after a good one, and an empty list
    encodings        lone surrogates, bytes that are not UTF-8, UTF-16 bodies, a byte-order
                     mark, control, zero-width, bidirectional and private-use characters
    over budget      too many lines, too long a prompt or line, too large a body, too wide a
                     beam, too much work, too many tokens, too large a k
    param types      every param given a string, a list, an object, a boolean, a fraction
    param ranges     every param out of its range (a negative seed, a length penalty of 5,000)
    unknown params   misspelt and made-up names
    body             not JSON, truncated, nested 100,000 deep, another format, another type

For each: the HTTP status, the first line of the answer (its `message`), whether the answer
has one line only, whether it quotes the request (a marker placed in every request where it is
not what is wrong), the seconds to the answer and the server's peak RSS after it (VmHWM of its
processes; in process: this one's). After them one good request checks that the server still
answers. Writes benchmarks/results/bad_requests.json and .md (docs/benchmarks.md, "Bad
requests to a served run").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bad_requests"
MARKER = "qq-echo-marker"  # in every request where it is not the fault: an answer must not hold it
JSON = "application/json"
SERVE_DEADLINE_S = 180.0


# --------------------------------------------------------------------------- the requests


def body(inputs=None, params=None, **extra) -> bytes:
    """A JSON request body; `inputs` left out when None and `extra` has no `inputs`."""
    doc = dict(extra)
    if inputs is not None:
        doc["inputs"] = inputs
    if params is not None:
        doc["params"] = params
    return json.dumps(doc).encode()


def task_of(model_uri: str) -> str:
    """The run's task, read from the params its model's signature names."""
    from mlflow.models import get_model_info

    signature = get_model_info(model_uri).signature
    names = {p.name for p in signature.params.params} if signature and signature.params else set()
    if "beam_size" in names:
        return "mt"
    return "lm" if "tokens" in names else "vectors"


def requests_for(task: str, good: str, per_kind: int) -> list[dict]:
    """[{kind, what, body, content_type}]: at least `per_kind` bad requests of each kind."""
    ok = f"{good} {MARKER}" if task != "vectors" else good  # a word must be in the vocabulary
    out: list[dict] = []

    def add(kind: str, what: str, data: bytes, content_type: str = JSON) -> None:
        out.append({"kind": kind, "what": what[:90], "body": data, "content_type": content_type})

    # input types
    wrong = [3, -1, 3.5, None, True, False, [], ["a"], [[1, 2]], {"a": 1}, {}, 1e308, [None]]
    for value in wrong:
        add("input types", f"inputs [{json.dumps(value)}]", body([value]))
        add("input types", f"inputs [good, {json.dumps(value)}]", body([ok, value]))
    for value in (3, None, True, {"text": ok}, {"a": [ok]}, 2.5, [[ok]], [[ok, ok], [ok]]):
        add("input types", f"inputs {json.dumps(value)[:40]}", body(value))
    # empty
    blanks = ["", " ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2028", "\u200b", "\ufeff",
              "\u0085", " \t \n ", "\x0b", "\x1c", "\u2003"]  # fmt: skip
    for text in blanks:
        add("empty", f"inputs [{text!r}]", body([text]))
        add("empty", f"inputs [good, {text!r}]", body([ok, text]))
    add("empty", "inputs []", body([]))
    add("empty", "no inputs, params only", body(params={}))
    # encodings
    surrogates = ["\\ud800", "\\udfff", "a\\ud83d", "\\udc00\\ud800", f"{ok}\\ud800"]
    for text in surrogates:
        add("encodings", f"JSON escape {text[:30]}", f'{{"inputs": ["{text}"]}}'.encode())
    raw = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80",
           b"\xe4\xbd", b"caf\xe9"]  # fmt: skip
    for data in raw:
        add("encodings", f"raw bytes {data!r} in a line", b'{"inputs": ["' + data + b'"]}')
    doc = json.dumps({"inputs": [f"{good} Grüße"]}, ensure_ascii=False)
    for encoding in ("latin-1", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"):
        with contextlib.suppress(UnicodeEncodeError):
            add("encodings", f"body in {encoding}", doc.encode(encoding))
    add("encodings", "charset=latin-1", doc.encode("latin-1"), f"{JSON}; charset=latin-1")
    for text in ["\u0000", "\u0007", "\u202e" + good, "\u200b\u200b", "\u0301\u0301", "\ue000",
                 "\uffff", "\U0001f600", "a\u0000b", "\u061c", "\U000e0001"]:  # fmt: skip
        add("encodings", f"inputs [{text!r}]", body([text]))
    # over budget
    for n in (65, 100, 1_000, 10_000, 50_000):
        add("over budget", f"{n:,} lines", body([ok] * n))
    for n in (2_001, 5_000, 50_000, 150_000):
        add("over budget", f"a line of {n:,} words", body([" ".join([good.split()[0]] * n)]))
    for mb in (1.1, 2, 8):
        add("over budget", f"a body of {mb} MB", body([ok, "x" * int(mb * 1_000_000)]))
    add("over budget", "64 lines of 16 KiB each", body(["y" * 16_384] * 64))
    if task == "mt":
        for beam in (17, 100, 10_000, 2**40):
            add("over budget", f"beam_size {beam:,}", body([ok], {"beam_size": beam}))
        for n in (201, 400, 1_000):
            add("over budget", f"a line of {n} pieces", body([" ".join(["hund"] * n)]))
        for lines, words, beam in ((64, 60, 16), (64, 100, 8), (40, 150, 16), (64, 30, 16)):
            line = " ".join(good.split() * (words // len(good.split()) + 1))
            add("over budget", f"{lines} lines x {words} words, beam {beam}",
                body([line] * lines, {"beam_size": beam}))  # fmt: skip
    elif task == "lm":
        for tokens in (1_001, 5_000, 100_000, 2**40):
            add("over budget", f"tokens {tokens:,}", body([ok], {"tokens": tokens}))
        for prompts, tokens in ((3, 1_000), (64, 40), (20, 200), (64, 1_000), (10, 500)):
            add("over budget", f"{prompts} prompts x {tokens} tokens",
                body([ok] * prompts, {"tokens": tokens}))  # fmt: skip
        for k in (101, 10_000, 2**40):
            add("over budget", f"neighbours k {k:,}",
                body([good.split()[0]], {"mode": "neighbours", "k": k}))  # fmt: skip
        add("over budget", "score 64 lines of 2,000 words",
            body([" ".join([good.split()[0]] * 2_000)] * 64, {"mode": "score"}))  # fmt: skip
    else:
        for k in (101, 1_000, 10**6, 2**40, 2**62):
            add("over budget", f"k {k:,}", body([good], {"k": k}))
        for k in (101, 10**6):
            add("over budget", f"analogy k {k:,}",
                body([f"{good} {good} {good}"], {"mode": "analogy", "k": k}))  # fmt: skip
        for n in (2, 5, 50):
            add("over budget", f"a word of {n} MB", body(["w" * int(n * 1_000_000)]))
    # param types and ranges
    names = {"mt": ["beam_size", "length_penalty"],
             "lm": ["tokens", "temperature", "top_k", "seed", "k", "mode"],
             "vectors": ["k", "mode"]}[task]  # fmt: skip
    wrong_types = ["x", "", "3", [1], {"a": 1}, True, False, 1.5, [], {}, "NaN", "1e3", -0.5]
    for name in names:
        for value in wrong_types:
            if name == "mode" and isinstance(value, str):
                continue
            if name in ("temperature", "length_penalty") and isinstance(value, float):
                continue
            add("param types", f"{name} {json.dumps(value)}", body([ok], {name: value}))
    for value in ("Infinity", "-Infinity", "NaN"):  # Python's JSON reads them as floats
        name = names[-1] if task == "lm" else names[0]
        name = "temperature" if task == "lm" else name
        add("param types", f"{name} {value}", f'{{"inputs": ["{ok}"], "params": {{"{name}": '
            f"{value}}}}}".encode())  # fmt: skip
    add("param types", "params a list", body([ok], [1, 2]))
    add("param types", "params a string", body([ok], "beam"))
    add("param types", "params a number", body([ok], 3))
    ranges = {
        "mt": [("beam_size", v) for v in (0, -1, -100, -(2**31), -(2**63), 2**62, 2**63 - 1)]
        + [
            ("length_penalty", v)
            for v in (-1, -1e-9, -0.5, -100, 10.001, 11, 100, 5000, 1e6, 1e308, -1e308)
        ],
        "lm": [("tokens", v) for v in (0, -1, -(2**63))]
        + [("seed", v) for v in (-1, -(2**63))]
        + [("temperature", v) for v in (-1, -1e-300, 1e-9, 1e-300)]
        + [("top_k", v) for v in (-1, -(2**63))]
        + [("k", v) for v in (0, -1)]
        + [("mode", v) for v in ("", "GENERATE", "sing", "translate", "generate ", "x" * 500)],
        "vectors": [("k", v) for v in (0, -1, -(2**63))]
        + [("mode", v) for v in ("", "NEIGHBOURS", "generate", "score", "analogy ", "x" * 500)],
    }[task]
    for name, value in ranges:
        add("param ranges", f"{name} {json.dumps(value)[:40]}", body([ok], {name: value}))
    if task == "mt":
        for beam, penalty in ((2, 5000), (5, 1e6), (16, 11), (1, 1e300)):
            params = {"beam_size": beam, "length_penalty": penalty}
            add("param ranges", f"beam_size {beam}, length_penalty {penalty:g}", body([ok], params))
    if task == "vectors":
        for text in ("a b", "a b c d", good, f"{good} {good}", "", "   "):
            add("param ranges", f"analogy {text!r}", body([text], {"mode": "analogy"}))
    # unknown params
    unknown = [
        *("beam", "beams", "beam-size", "BEAM_SIZE", "tokens_", "token", "max_tokens", "temp"),
        *("temperatur", "topk", "top-k", "sed", "K", "kk", "modes", "Mode", "", " ", "x" * 1000),
        *("ünknown", "\u200b", "__class__", "inputs", "params", "n", "samples", "timing"),
        *("length-penalty", "lenpen", "alpha", "restrict_vocab", "method"),
    ]
    for name in unknown:
        add("unknown params", f"param {name[:40]!r}", body([ok], {name: 1}))
    # body
    bodies = [b"", b"{", b"[", b"null", b"3", b'"text"', b'["a"]', b"{}", b'{"input": ["a"]}',
              b'{"inputs": ["a"],}', b"{'inputs': ['a']}", b'{"inputs": ["a"] "params": {}}',
              b'{"inputs": ["a"], "instances": ["b"]}', b'{"params": {}}', b"\x00" * 100,
              b"[" * 100_000 + b"]" * 100_000, b'{"inputs": ' + b"[" * 50_000 + b"]" * 50_000
              + b"}", b'{"dataframe_split": {"columns": ["a", "b"], "data": [["x", "y"]]}}',
              b'{"dataframe_records": [{"a": "x"}]}', b'{"inputs": {"a": ["x"], "b": ["y"]}}',
              b'{"inputs": ["a"], "inputs": 3}', b"true", b'{"inputs": "' + b"z" * 100 + b'"'
              ]  # fmt: skip
    for data in bodies:
        add("body", f"body {data[:40]!r}" + ("..." if len(data) > 40 else ""), data)
    for content_type in ("text/plain", "text/csv", "application/x-www-form-urlencoded",
                         "application/octet-stream", f"{JSON}; foo=bar", "application/parquet",
                         ""):  # fmt: skip
        add("body", f"content type {content_type!r}", body([ok]), content_type)
    counts = Counter(r["kind"] for r in out)
    for kind, n in counts.items():  # repeat the kind's requests up to `per_kind`
        mine = [r for r in out if r["kind"] == kind]
        out += [dict(r, what=f"{r['what']} (again)") for r in mine[: max(0, per_kind - n)]]
    return out


# --------------------------------------------------------------------------- asking


def peak_rss(pids: list[int]) -> int:
    """The largest VmHWM (bytes) among `pids`."""
    peak = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
    return peak


def group_pids(pgid: int) -> list[int]:
    """The processes of process group `pgid` (the server and its worker)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                out.append(int(stat.parent.name))
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`mlflow models serve` of the model on 127.0.0.1, in its own process group."""

    def __init__(self, model_uri: str, env: dict, log: Path) -> None:
        import requests

        self.requests = requests
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        mlflow = Path(sys.executable).with_name("mlflow")
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(mlflow), "models", "serve", "-m", model_uri, "--env-manager", "local",
                 "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + SERVE_DEADLINE_S
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited: {log.read_text()[-3000:]}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.url}/ping", timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the server was not up in {SERVE_DEADLINE_S:.0f} s")
            time.sleep(0.3)

    def ask(self, data: bytes, content_type: str) -> tuple[int, bytes]:
        headers = {"Content-Type": content_type} if content_type else {}
        try:
            r = self.requests.post(
                f"{self.url}/invocations", data=data, headers=headers, timeout=120
            )
        except self.requests.RequestException as e:
            return 0, f"no answer: {type(e).__name__}: {e}".encode()
        return r.status_code, r.content

    def rss(self) -> int:
        return peak_rss(group_pids(self.proc.pid))

    def alive(self) -> bool:
        try:
            return self.requests.get(f"{self.url}/ping", timeout=5).status_code == 200
        except self.requests.RequestException:
            return False

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):  # a worker whose leader is gone
            os.killpg(self.proc.pid, signal.SIGKILL)


class InProcess:
    """The model loaded here, each request given to the scoring server's handler as the server
    gives it (an MlflowException becomes its status and JSON, as the server's app does)."""

    def __init__(self, model_uri: str) -> None:
        import mlflow.pyfunc

        self.model = mlflow.pyfunc.load_model(model_uri)
        self.schema = self.model.metadata.get_input_schema()

    def ask(self, data: bytes, content_type: str) -> tuple[int, bytes]:
        from mlflow.exceptions import MlflowException
        from mlflow.pyfunc import scoring_server

        try:
            result = scoring_server.invocations(data, content_type, self.model, self.schema)
        except MlflowException as e:
            return e.get_http_status_code(), e.serialize_as_json().encode()
        except Exception as e:  # what the server answers as 500 Internal Server Error
            return 500, f"Internal Server Error ({type(e).__name__}: {e})".encode()[:2000]
        response = result.response
        return result.status, response.encode() if isinstance(response, str) else response

    def rss(self) -> int:
        return peak_rss([os.getpid()])

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        pass


def first_line(status: int, content: bytes) -> tuple[str, bool]:
    """(the answer's first line: its `message` when JSON, else its text; whether it is one
    line)."""
    text = content.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        doc = json.loads(text)
        if isinstance(doc, dict) and "message" in doc:
            text = str(doc["message"])
        elif status == 200 and isinstance(doc, dict) and isinstance(doc.get("predictions"), list):
            found = json.dumps(doc["predictions"], ensure_ascii=False)
            text = f"{len(doc['predictions'])} answers: {found[:100]}"
    lines = text.strip().splitlines() or [""]
    return lines[0][:200], len(lines) == 1


def measure(asker, requests: list[dict], good: bytes) -> dict:
    rows = []
    for r in requests:
        t0 = time.perf_counter()
        status, content = asker.ask(r["body"], r["content_type"])
        seconds = time.perf_counter() - t0
        line, one = first_line(status, content)
        rows.append({
            "kind": r["kind"],
            "request": r["what"],
            "bytes": len(r["body"]),
            "status": status,
            "answer": line,
            "one_line": one,
            "echo": MARKER.encode() in content and MARKER.encode() in r["body"] and status != 200,
            "seconds": round(seconds, 4),
            "server_peak_rss_mib": round(asker.rss() / 2**20, 1),
        })  # fmt: skip
    status, content = asker.ask(good, JSON)
    return {
        "rows": rows,
        "still_answers": asker.alive() and status == 200,
        "good_answer": first_line(status, content)[0],
    }


# --------------------------------------------------------------------------- the tables


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        refused = [r for r in mine if r["status"] != 200]
        out.append({
            "kind": kind,
            "requests": len(mine),
            "statuses": dict(sorted(Counter(str(r["status"]) for r in mine).items())),
            "refused_in_one_line": sum(r["one_line"] for r in refused),
            "refused": len(refused),
            "echo": sum(r["echo"] for r in mine),
            "max_seconds": max(r["seconds"] for r in mine),
            "peak_rss_mib": max(r["server_peak_rss_mib"] for r in mine),
        })  # fmt: skip
    return out


def markdown(result: dict) -> str:
    lines = [
        f"`{result['model']}` ({result['task']}), {result['mode']}; still answers a good "
        f"request after them: {'yes' if result['still_answers'] else 'NO'}.",
        "",
        "| kind | requests | statuses | refused in one line | quoting the request | "
        "slowest s | server peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        statuses = ", ".join(f"{k}: {v}" for k, v in s["statuses"].items())
        lines.append(
            f"| {s['kind']} | {s['requests']} | {statuses} | {s['refused_in_one_line']} / "
            f"{s['refused']} | {s['echo']} | {s['max_seconds']:.3f} | {s['peak_rss_mib']:.0f} |"
        )
    lines += [
        "",
        "| kind | request | status | first line of the answer | s | server peak RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        answer = r["answer"].replace("|", "\\|").replace("`", "'")
        request = r["request"].replace("|", "\\|").replace("`", "'")
        lines.append(
            f"| {r['kind']} | {request} | {r['status']} | {answer} | {r['seconds']:.3f} | "
            f"{r['server_peak_rss_mib']:.0f} |"
        )
    m = result["machine"]
    lines += ["", f"{m['cpu']}, {m['cores']} cores, MLflow {m['mlflow']}, {result['date']}."]
    return "\n".join(lines) + "\n"


def machine() -> dict:
    import mlflow

    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "mlflow": mlflow.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this)")
    parser.add_argument("--run", default="transformer", help="its run: nlpzoo-RUN@champion")
    parser.add_argument("--model", help="instead of --run: an MLflow model URI or folder")
    parser.add_argument("--in-process", action="store_true", help="no server: the handler here")
    parser.add_argument("--per-kind", type=int, default=30, help="requests of each kind (30)")
    parser.add_argument("--out", type=Path, default=OUT, help="the results, .json and .md")
    parser.add_argument("--sentence", default="Ein Hund läuft über die Wiese.")
    parser.add_argument("--prompt", default="the jury said")
    parser.add_argument("--word", default="city")
    parser.add_argument("--markdown", action="store_true", help="print the tables of --out")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.out.with_suffix(".json").read_text())))
        return 0
    root = args.root.resolve()
    uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{root / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri
    model_uri = args.model or f"models:/nlpzoo-{args.run}@champion"
    task = task_of(model_uri)
    good = {"mt": args.sentence, "lm": args.prompt, "vectors": args.word}[task]
    requests = requests_for(task, good, args.per_kind)
    env = {**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    asker = (
        InProcess(model_uri)
        if args.in_process
        else Served(model_uri, env, args.out.with_suffix(".server.log"))
    )
    try:
        found = measure(asker, requests, body([good]))
    finally:
        asker.stop()
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model_uri,
        "task": task,
        "mode": "in process" if args.in_process else "mlflow models serve",
        "machine": machine(),
        "still_answers": found["still_answers"],
        "good_answer": found["good_answer"],
        "summary": summary(found["rows"]),
        "rows": found["rows"],
    }
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result).split("\n\n| kind | request")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
