"""`bench --sweep` and `--rate` against a stand-in OpenAI endpoint on
127.0.0.1 (a thread serving streamed chat completions): the steps, their
percentiles and goodput, the highest rate within an SLO, the in-flight
timeline, the JSON the CLI writes and the report made from it. Structure
only: the stand-in's speed is not llmctl's business."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers import run_cli
from llmctl.loadgen import bench
from llmctl.loadsweep import sweep
from llmctl.perf.slo import parse_slo, parse_sweep


PROMPTS: list[str] = []  # every prompt the stand-in received
CUT_AT = 13  # max_tokens that makes the stand-in cut its stream mid-event
SEPARATORS = 14  # max_tokens that makes the stand-in's text hold characters str.splitlines() splits at


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "stand-in"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        PROMPTS.append(req["messages"][0]["content"])
        n = int(req.get("max_tokens") or 4)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj) -> None:  # raw non-ASCII, as vLLM's pydantic JSON has it
            data = f"data: {obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        time.sleep(0.02)
        if n == CUT_AT:  # the connection ends in the middle of an event, as when a replica goes away mid-stream
            send({"choices": [{"delta": {"content": "x"}}]})
            partial = b'data: {"choices": [{"delta": {"cont'
            self.wfile.write(f"{len(partial):x}\r\n".encode() + partial + b"\r\n0\r\n\r\n")
            self.wfile.flush()
            return
        text = "x\u2028y\x85z\u2029\x1c" if n == SEPARATORS else "x"
        for _ in range(n):
            send({"choices": [{"delta": {"content": text}}]})
            time.sleep(0.002)
        send({"choices": [], "usage": {"completion_tokens": n, "prompt_tokens": 10}})
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture(scope="module")
def endpoint():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_concurrency_sweep(endpoint):
    slo = parse_slo("ttft_p95=10s,itl_p95=1s")
    data = sweep(steps=parse_sweep("1,3"), duration=2.0, slo=slo, url=endpoint, max_tokens=8, prompt_tokens=4)
    assert data["kind"] == "llmctl-bench-sweep" and data["settings"]["model"] == "stand-in"
    assert [s["value"] for s in data["steps"]] == [1, 3]
    for s in data["steps"]:
        m = s["summary"]
        assert m["done"] > 0 and m["failed"] == 0 and m["output_tokens"] == 8 * m["done"]
        assert m["tpot_s"]["p95"] is not None and m["ttft_s"]["p50"] <= m["ttft_s"]["p95"] <= m["ttft_s"]["p99"]
        assert s["slo_met"] and s["goodput"]["requests"] == m["done"]
        assert len(s["requests"]) == m["requests"]
    assert data["steps"][1]["t0"] >= data["steps"][0]["t0"] + 2.0
    assert max(n for _, n in data["inflight"]) <= 3 and data["inflight"][-1][1] == 0
    mr = data["max_rate_within_slo"]
    assert mr["req_per_s"] == max(s["summary"]["req_per_s"] for s in data["steps"])


def test_rate_steps_and_single_rate_run(endpoint):
    data = sweep(steps=parse_sweep("rate=5,20"), duration=2.0, url=endpoint, max_tokens=4, prompt_tokens=4,
                 max_concurrency=64)
    assert [s["mode"] for s in data["steps"]] == ["rate", "rate"] and [s["rate"] for s in data["steps"]] == [5.0, 20.0]
    sent = [s["summary"]["requests"] for s in data["steps"]]
    assert sent[1] > sent[0]  # four times the arrival rate sends more in the same time
    assert "max_rate_within_slo" not in data  # no SLO given
    one = bench(url=endpoint, duration=1.0, rate=10, concurrency=16, max_tokens=4, prompt_tokens=4)
    assert one.settings.rate == 10 and one.done > 0 and all(r.start >= 0 for r in one.results)


def test_cli_sweep_writes_profile_and_report(endpoint, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    prof, rep = tmp_path / "b.json", tmp_path / "rep"
    r = run_cli(capsys, "bench", "--url", endpoint, "--sweep", "1,2", "--duration", "0.8", "--max-tokens", "6",
                "--slo", "ttft_p95=5s,itl_p95=500ms", "--output", prof, "--report", rep)
    assert r.code == 0, r.err
    assert "highest rate within ttft_p95=5000ms,itl_p95=500ms" in r.out and "goodput req/s" in r.out
    assert json.loads(prof.read_text())["slo"] == {"ttft_p95": 5.0, "itl_p95": 0.5}
    assert (rep / "index.html").exists() and (rep / "benchmark_report.json").exists()
    r = run_cli(capsys, "bench", "--url", endpoint, "--sweep", "1")
    assert r.code == 2 and "--duration" in r.err
    r = run_cli(capsys, "bench", "--url", endpoint, "--requests", "2", "--max-tokens", "3", "--slo", "ttft_p95=5s", "--json")
    assert r.code == 0 and r.json()["slo_met"] is True and r.json()["goodput"]["requests"] == 2


def test_repeat_pools_each_steps_holds(endpoint, tmp_path, capsys):
    """--repeat 2: the sweep runs twice; each step is one row pooling both holds.
    Every request of the sweep has a prompt of its own (no prefix-cache hits between them)."""
    once = sweep(steps=parse_sweep("1,2"), duration=1.0, url=endpoint, max_tokens=4, prompt_tokens=4)
    seen = len(PROMPTS)
    data = sweep(steps=parse_sweep("1,2"), duration=1.0, url=endpoint, max_tokens=4, prompt_tokens=4, repeat=2)
    assert data["settings"]["repeat"] == 2 and [s["value"] for s in data["steps"]] == [1, 2]
    for s, s1 in zip(data["steps"], once["steps"]):
        m = s["summary"]
        assert s["passes"] == 2 and len(s["requests"]) == m["requests"] and m["failed"] == 0
        # two holds of at least 1 s each, against one (lower bounds only: a loaded machine stretches a hold's
        # tail, the requests still in flight when it ends; a fresh-clone run saw one hold take 10 s)
        assert m["seconds"] >= 2.0 and s1["summary"]["seconds"] >= 1.0
        assert m["req_per_s"] == pytest.approx(m["done"] / m["seconds"], rel=1e-3)  # seconds: rounded to ms
    prompts = PROMPTS[seen:]
    assert len(prompts) == sum(s["summary"]["requests"] for s in data["steps"])
    assert len(set(prompts)) == len(prompts) and {len(p.split()) for p in prompts} == {4}
    # the second pass comes after every step of the first: step 2 started before the first pass ended
    assert data["steps"][1]["t0"] < data["steps"][0]["summary"]["seconds"] + data["steps"][1]["summary"]["seconds"]
    prof = tmp_path / "b.json"
    r = run_cli(capsys, "bench", "--url", endpoint, "--sweep", "1", "--duration", "0.5", "--repeat", "2", "--output", prof)
    assert r.code == 0, r.err
    assert r.err.count("(pass ") == 2 and "2 times (pooled)" in r.out
    assert json.loads(prof.read_text())["steps"][0]["passes"] == 2
    for bad in (["--sweep", "1", "--duration", "1", "--repeat", "0"], ["--requests", "2", "--repeat", "2"]):
        r = run_cli(capsys, "bench", "--url", endpoint, *bad)
        assert r.code == 2 and "--repeat" in r.err and "Traceback" not in r.err


def test_warmup_leaves_out_each_steps_first_seconds(endpoint, capsys):
    """--warmup 1 on 2 s holds: a step counts the requests started in its last second, over that second."""
    data = sweep(steps=parse_sweep("1,3"), duration=2.0, url=endpoint, max_tokens=4, prompt_tokens=4, warmup=1.0, repeat=2)
    assert data["settings"]["warmup_s"] == 1.0
    for s in data["steps"]:
        m = s["summary"]
        assert m["seconds"] == pytest.approx(2.0)  # two holds, one second of each counted
        assert m["done"] > 0 and all(1.0 <= q["start"] < 2.0 for q in s["requests"])
        assert m["req_per_s"] == pytest.approx(m["done"] / 2.0, rel=1e-3)
    assert data["steps"][1]["t0"] >= 2.0  # the holds themselves ran whole (step 1 after one 2 s hold of step 0)
    r = run_cli(capsys, "bench", "--url", endpoint, "--sweep", "1", "--duration", "1.5", "--warmup", "0.5")
    assert r.code == 0, r.err
    assert "the first 0.5 s left out" in r.out
    for bad in (["--sweep", "1", "--duration", "1", "--warmup", "1"], ["--sweep", "1", "--duration", "1", "--warmup", "-1"],
                ["--requests", "2", "--warmup", "1"]):
        r = run_cli(capsys, "bench", "--url", endpoint, *bad)
        assert r.code == 2 and "--warmup" in r.err and "Traceback" not in r.err, r.err


def test_a_stream_cut_mid_event_is_a_failure_that_says_so(endpoint):
    """A stream that ends inside an event is a failed request named for what happened, with the last event
    received (the one cut short is dropped, as the SSE spec says), not a JSON parser's exception name."""
    res = bench(url=endpoint, requests=2, concurrency=2, max_tokens=CUT_AT, prompt_tokens=4)
    assert res.done == 0 and len(res.results) == 2
    failures = res.to_json()["failures"]
    assert [f["error"] for f in failures] == ["stream cut before [DONE]"] * 2
    assert all(f["detail"] == 'last event: {"choices": [{"delta": {"content": "x"}}]}' for f in failures), failures
    assert res.to_json()["summary"]["errors"] == {"stream cut before [DONE]": 2}


def test_text_with_unicode_line_separators_is_one_event(endpoint):
    """JSON strings carry U+2028, U+2029 and U+0085 unescaped, and a model (the tests' random-weight one included)
    generates them; SSE ends a line at CR or LF only. A client splitting where str.splitlines() does (httpx's
    aiter_lines) read such a chunk as a cut event: once 1 request of 497 in a long test failed so."""
    res = bench(url=endpoint, requests=3, concurrency=3, max_tokens=SEPARATORS, prompt_tokens=4)
    assert res.done == 3 and res.to_json()["failures"] == [], res.to_json()["failures"]
    assert all(len(r.itls) == SEPARATORS - 1 for r in res.results)  # every chunk read as one token's event
