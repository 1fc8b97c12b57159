"""What `llmctl bench` sends (issue 41): prefix pools and trace replay, against
a small real HTTP server that answers OpenAI chat completions (no cluster:
the engines' side is in tests/test_latency_e2e.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers import run_cli
from llmctl.errors import UsageError
from llmctl.workload import PrefixPool, read_trace


class _Chat(BaseHTTPRequestHandler):
    seen: list = []

    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((time.monotonic(), body))
        n = body["max_tokens"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for _ in range(n):
            self.wfile.write(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n')
        usage = {"completion_tokens": n, "prompt_tokens": len(body["messages"][0]["content"].split())}
        self.wfile.write(f'data: {json.dumps({"choices": [], "usage": usage})}\n\ndata: [DONE]\n\n'.encode())


@pytest.fixture
def chat_server():
    _Chat.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", _Chat.seen
    srv.shutdown()
    srv.server_close()


def test_prefix_pool_prompts_share_their_prefix(chat_server, capsys):
    url, seen = chat_server
    r = run_cli(capsys, "bench", "--url", url, "--model-id", "m", "--requests", "40", "--concurrency", "4",
                "--prompt-tokens", "6", "--max-tokens", "2", "--prefixes", "3", "--prefix-tokens", "20", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    prompts = [b["messages"][0]["content"].split() for _, b in seen]
    assert len(prompts) == 40 and all(len(p) == 26 for p in prompts)
    prefixes = {tuple(p[:20]) for p in prompts}
    assert len(prefixes) == 3  # 40 draws of 3: every prefix drawn (a miss has odds 3 * (2/3)^40)
    assert len({tuple(p[20:]) for p in prompts}) == 40  # each request its own part
    pool = data["summary"]["prefix_pool"]
    assert pool["count"] == 3 and pool["tokens"] == 20 and sum(pool["requests_per_prefix"].values()) == 40
    # a new run draws new prefixes (a cold cache every run)
    seen.clear()
    assert run_cli(capsys, "bench", "--url", url, "--model-id", "m", "--requests", "6", "--prompt-tokens", "6",
                   "--max-tokens", "2", "--prefixes", "3", "--prefix-tokens", "20", "--json").code == 0
    assert not prefixes & {tuple(b["messages"][0]["content"].split()[:20]) for _, b in seen}


def test_prefix_pool_is_deterministic_per_salt():
    pool = PrefixPool(4, 30)
    assert pool.text(2, "s") == pool.text(2, "s") != pool.text(3, "s")
    assert pool.text(2, "s") != pool.text(2, "t")
    assert {pool.draw(k, "s") for k in range(200)} == {0, 1, 2, 3}


def test_trace_replays_at_its_times_with_its_tokens(chat_server, capsys, tmp_path):
    url, seen = chat_server
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,input_tokens,output_tokens,prefix_id\n100.0,5,3,\n101.0,7,2,\n101.5,9,4,\n103.0,5,1,\n")
    r = run_cli(capsys, "bench", "--url", url, "--model-id", "m", "--trace", str(trace), "--speedup", "2", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)["summary"]
    assert s["done"] == 4 and s["output_tokens"] == 3 + 2 + 4 + 1
    arrived = [t for t, _ in seen]  # the first connection's set-up delays only the first arrival
    gaps = [b - a for a, b in zip(arrived[1:], arrived[2:])]
    for got, want in zip(gaps, [0.25, 0.75]):  # the trace's gaps (0.5 s, 1.5 s) halved
        assert abs(got - want) < 0.15, arrived
    assert arrived[-1] - arrived[0] == pytest.approx(1.5, abs=0.35)
    assert [b["max_tokens"] for _, b in seen] == [3, 2, 4, 1]


def test_trace_prefix_ids_pick_the_shared_prefix(chat_server, capsys, tmp_path):
    url, seen = chat_server
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps({"timestamp": i * 0.05, "input_tokens": 30, "output_tokens": 1, "prefix_id": i % 2})
                               for i in range(6)) + "\n")
    r = run_cli(capsys, "bench", "--url", url, "--model-id", "m", "--trace", str(trace), "--prefixes", "2",
                "--prefix-tokens", "20", "--json")
    assert r.code == 0, r.err
    words = [b["messages"][0]["content"].split() for _, b in sorted(seen, key=lambda x: x[0])]
    assert all(len(w) == 30 for w in words)  # 20 shared + 10 of its own = the row's input tokens
    by_id = {}
    for w, rid in zip(words, [i % 2 for i in range(6)]):
        by_id.setdefault(rid, set()).add(tuple(w[:20]))
    assert len(by_id[0]) == 1 and len(by_id[1]) == 1 and by_id[0] != by_id[1]


@pytest.mark.parametrize("text,layout,n", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:48.1805900,10,3\n", "azure", 2),
    ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5.0,ChatGPT,472,18,490,Conversation log\n"
     "7.5,GPT-4,1087,0,1087,Conversation log\n9.0,ChatGPT,20,10,30,API log\n", "burstgpt", 2),
    ("timestamp,input_tokens,output_tokens\n3,10,5\n1,12,6\n", "llmctl", 2),
])
def test_trace_layouts(tmp_path, text, layout, n):
    p = tmp_path / "trace.csv"
    p.write_text(text)
    t = read_trace(p)
    assert t.layout == layout and len(t.requests) == n
    assert t.requests[0].t == 0.0 and all(a.t <= b.t for a, b in zip(t.requests, t.requests[1:]))
    if layout == "azure":
        assert abs(t.requests[1].t - 1.5) < 1e-6 and t.requests[0].input_tokens == 374
    if layout == "burstgpt":
        assert t.skipped == 1 and t.requests[1].t == 4.0  # the failed request (0 response tokens) left out
    if layout == "llmctl":
        assert (t.requests[0].input_tokens, t.requests[1].input_tokens) == (12, 10)  # sorted by time


@pytest.mark.parametrize("text,line", [
    ("a,b\n1,2\n", "t.csv:1: columns a, b match no trace layout llmctl reads: Azure (TIMESTAMP, ContextTokens, GeneratedTokens), "
                   "BurstGPT (Timestamp, Request tokens, Response tokens, ...) or timestamp, input_tokens, output_tokens[, prefix_id]"),
    ("timestamp,input_tokens,output_tokens\n0,5,5\n1,five,5\n", "t.csv:3: column 'input_tokens': 'five' is not a whole number of tokens"),
    ("timestamp,input_tokens,output_tokens\nnoon,5,5\n", "t.csv:2: column 'timestamp': 'noon' is neither seconds nor a date (2023-11-16 18:15:46.68)"),
    ("timestamp,input_tokens,output_tokens\n0,5\n", "t.csv:2: 2 cells where the header has 3"),
    ("timestamp,input_tokens,output_tokens\n0,5,0\n", "t.csv:2: column 'output_tokens': 0 output tokens (each request generates at least one)"),
    ('{"timestamp": 0, "input_tokens": 5, "output_tokens": 2}\n{"timestamp": 1, "input_tokens": 5\n',
     "t.csv:2: not a JSON object (Expecting ',' delimiter, column 35)"),
    ("", "t.csv: empty trace (expected a header row: Azure (TIMESTAMP, ContextTokens, GeneratedTokens), BurstGPT "
         "(Timestamp, Request tokens, Response tokens, ...) or timestamp, input_tokens, output_tokens[, prefix_id])"),
])
def test_bad_traces_name_file_line_and_column(tmp_path, capsys, text, line):
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(UsageError) as e:
        read_trace(p)
    assert str(e.value) == f"{tmp_path}/{line}"
    r = run_cli(capsys, "bench", "--url", "http://127.0.0.1:9/v1", "--model-id", "m", "--trace", str(p))
    assert r.code == 2 and r.err.strip() == f"error: {tmp_path}/{line}" and "Traceback" not in r.err


def test_trace_peak_is_the_busiest_window(tmp_path):
    rows = [(i * 2.0, 10, 5) for i in range(30)]  # 0.5 req/s for 60 s ...
    rows += [(60 + i * 0.25, 20, 5) for i in range(40)]  # ... then 4 req/s for 10 s
    rows += [(70 + i * 2.0, 10, 5) for i in range(25)]
    p = tmp_path / "t.csv"
    p.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{t},{a},{b}\n" for t, a, b in rows))
    t = read_trace(p)
    start, rate, peak = t.peak(10.0)
    assert 59 <= start <= 61 and rate == pytest.approx(4.0, rel=0.15)
    assert sum(r.input_tokens for r in peak) / len(peak) > 18
    s = t.summary(10.0)
    assert s["mean_rate"] < 1.0 < s["peak"]["rate"]


def test_bench_trace_flag_errors(capsys, tmp_path):
    for args, line in [
        (["--speedup", "2"], "error: --speedup: scales a trace's times; add --trace FILE"),
        (["--prefixes", "3"], "error: --prefixes and --prefix-tokens: a prefix pool needs both, each a positive integer (e.g. 8 prefixes of 256 tokens; got 3 and 0)"),
        (["--trace", str(tmp_path / "none.csv")], f"error: {tmp_path}/none.csv: no such trace file"),
    ]:
        r = run_cli(capsys, "bench", "--url", "http://127.0.0.1:9/v1", "--model-id", "m", *args)
        assert r.code == 2 and r.err.strip() == line, r.err
