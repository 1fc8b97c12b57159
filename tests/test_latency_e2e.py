"""Serving for latency (issue 41), end to end on the session's Ray head with the
tiny model (real vLLM CPU engines, gen-config → up → bench, no hand edits):

- the prefix router: two replicas behind `--router prefix` and behind Serve's
  default (`--router pow2`), the same prefix-heavy load from `bench
  --prefixes`: vLLM's prefix-cache hit rate (its own counters, as bench reports
  them) is higher with the prefix router in every run, by a margin;
- trace replay: `bench --trace` of a 2-minute trace with a burst on an app
  that autoscales 1-2; the replica timeline follows the burst, and `plan
  --trace` on the same trace asks for the replicas the burst took;
- latency autoscaling: an app with `--autoscale-on ttft_p95=...` scales 1 → 2
  under a load that pushes TTFT over the target and back to 1 after it; the
  same load with the target far above does not scale.

One app at a time (each `down` before the next): two CPU replicas already
share this machine's cores. Generated text is never asserted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers import llmctl

pytestmark = [pytest.mark.cluster, pytest.mark.engine]

BENCH = ["--prefixes", "12", "--prefix-tokens", "200", "--prompt-tokens", "12", "--max-tokens", "4",
         "--requests", "72", "--concurrency", "3", "--json"]


def _gen(tiny_model, out: Path, name: str, *extra: str) -> Path:
    r = llmctl("gen-config", "--model", str(tiny_model), "--model-id", f"tiny-{name}", "--gpu", "cpu",
               "--app-name", f"lat_{name}", "--route-prefix", f"/{name}", "--enable-prefix-caching", *extra,
               "--yes", "-o", str(out / name))
    assert r.code == 0, r.err
    return next((out / name).glob("serve_*.yaml"))


def _up(serve: Path) -> None:
    t0 = time.monotonic()
    r = llmctl("up", str(serve), "--timeout", "900", timeout=1000)
    assert r.code == 0, r.out + r.err
    print(f"\nup {serve.parent.name}: RUNNING after {time.monotonic() - t0:.0f}s")


def _down(app: str) -> None:
    r = llmctl("down", app, "--timeout", "300")
    assert r.code == 0, r.err


def test_prefix_router_raises_the_prefix_cache_hit_rate(cluster_home, tiny_model, tmp_path):
    rates: dict[str, list[float]] = {}
    for name in ("pow2", "prefix"):
        serve = _gen(tiny_model, tmp_path, name, "--router", name, "--min-replicas", "2", "--max-replicas", "2")
        doc = (serve.parent / "model_config" / f"tiny-{name}.yaml").read_text()
        assert "request_router_config" in doc
        v = llmctl("validate", str(serve))
        assert v.code == 0, v.out + v.err
        _up(serve)
        try:
            for _ in range(2):  # each run draws new prefixes: a cold cache every run
                r = llmctl("bench", f"lat_{name}", *BENCH, timeout=900)
                assert r.code == 0, r.err
                s = r.json()["summary"]
                assert s["failed"] == 0 and s["done"] == 72, s
                pc = s["prefix_cache"]
                assert pc["queries"] > 0 and len(pc["replicas"]) == 2, pc  # both replicas served
                router = s["routing"][f"LLMServer:tiny-{name}"]["router"]
                assert ("PrefixCacheAffinityRouter" in router) == (name == "prefix"), router
                rates.setdefault(name, []).append(pc["hit_rate"])
                per = {k: round(v["hit_rate"], 3) for k, v in pc["replicas"].items()}
                print(f"\n{name}: prefix-cache hit rate {pc['hit_rate']:.3f} of {pc['queries']:.0f} prompt tokens "
                      f"(per replica {per}); TTFT p50 {s['ttft_s']['p50'] * 1000:.0f} ms")
                out = llmctl("bench", f"lat_{name}", *[a for a in BENCH if a != "--json"][:8], "--requests", "6")
                assert out.code == 0 and "prefix cache (vLLM):" in out.out and "request router:" in out.out, out.out
        finally:
            _down(f"lat_{name}")
    print(f"\nhit rates: pow2 {rates['pow2']}, prefix {rates['prefix']}")
    assert min(rates["prefix"]) > max(rates["pow2"]) + 0.05, rates
