"""DeepSeek V4: weights and KV cache as vLLM builds them (read in the vLLM
0.23.0 and 0.29.0 sdists; the facts come from :mod:`llmctl.arch_v4`).

**KV cache.** Every decoder layer has a sliding-window cache
(``v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache``:
SlidingWindowMLASpec, 64-token blocks, window ``sliding_window``); a layer of
compress ratio r > 1 also has a compressed MLA cache (``attention.py
get_kv_cache_spec``: MLAAttentionSpec, 256-token blocks = the FlashMLA sparse
backend's kernel block, 256 / r entries per block) and a compressor state
(``compressor.py CompressorStateCache``: float32, 2·coff·head_dim per entry,
4-entry blocks for r = 4 and 8 for r = 128, window coff·r, coff = 2 for r = 4
else 1); r = 4 layers add the indexer's compressed key cache (head_dim + 4 B
of scale per 128, uint8) and its compressor state. With fp8 KV the FlashMLA
layout is ``fp8_ds_mla``: 584 B per entry (448 NoPE + 128 RoPE + 8 scale,
``kv_cache_interface.py``) and pages padded to 576 B (``_apply_alignment_padding``);
bf16 KV is the FlashInfer layout (2 B × head_dim, no padding). The caches
replicate over TP ranks (one KV head).

Grouping (``kv_cache_utils.py group_and_unify_kv_cache_specs``,
``_get_kv_cache_groups_uniform_groups``): one group of every MLA-spec layer,
and the sliding specs by (block, window); the "layer tuple" count is the
padding-minimising divisor ``_approximate_gcd`` of the groups' most common
page-size counts; sliding pages are padded to the next MLA page size and a
sliding group split into cdiv(n, tuples) groups. Blocks:
``available // Σ page × slots`` (``_get_kv_cache_config_deepseek_v4``).
Concurrency (``get_max_concurrency_for_kv_cache_config``): blocks ÷
cdiv(Σ_groups pages-per-request × group page bytes, first group's page bytes),
pages per request cdiv(L, 256) for MLA, cdiv(min(window − 1 + in-flight, L),
block) + 1 for sliding specs; logged tokens = concurrency × L.

**Weights** (``models/deepseek_v4/nvidia/model.py``, ``attention.py``,
``compressor.py``, ``quant_config.py``): fp8-block linears (wq_b, wo_a and
wo_b split over TP, the fused q_a/kv projection and the indexer's wq_b
replicated), bf16 compressor projections and float32 ``ape`` / hyper-connection
parameters, routed experts in the checkpoint's ``expert_dtype`` (MXFP4 for
fp4), the hash layers' token→expert table (int32), and buffers built with
the model: the top-k index buffer (T × index_topk int32), the MTP hidden
buffer (T × hc_mult·hidden, last stage) and one float32 cos/sin cache per
rope theta (positions × rope_head_dim).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Optional

from llmctl.arch import ModelArch
from llmctl.sizing.formats import (MXFP4_HIDDEN_ALIGN, MXFP4_INTER_ALIGN, WeightFormat, _cdiv, _padded_vocab, _round_up,
                                   _scheme_bytes, pp_partition)

MLA_BLOCK = 256  # FlashMLA sparse DSV4 backend get_supported_kernel_block_sizes
SWA_BLOCK = 64  # DeepseekV4SWACache.block_size
STATE_BLOCKS = {4: 4, 128: 8}  # CompressorStateCache.block_size by compress ratio
FP8_DS_ENTRY = 584  # fp8_ds_mla bytes per cache entry (DeepseekV4)
PAGE_ALIGN = 576  # FlashMLA fp8_ds_mla page alignment
INDEX_QUANT_BLOCK = 128


@dataclass(frozen=True)
class Spec:
    kind: str  # mla | swa
    block: int  # tokens per block
    page: int  # bytes per block, after alignment
    window: int = 0  # sliding specs


def _align(page: int, fp8_ds: bool) -> int:
    return _round_up(page, PAGE_ALIGN) if fp8_ds else page


def layer_specs(arch: ModelArch, ratios: tuple[int, ...], kv_bytes: int) -> list[Spec]:
    """The cache specs vLLM registers for decoder layers of these compress ratios."""
    c = arch.compressed
    fp8_ds = kv_bytes == 1
    entry = FP8_DS_ENTRY if fp8_ds else c.head_dim * kv_bytes
    out = []
    for r in ratios:
        out.append(Spec("swa", SWA_BLOCK, _align(SWA_BLOCK * entry, fp8_ds), c.window))
        if r <= 1:
            continue
        out.append(Spec("mla", MLA_BLOCK, _align(MLA_BLOCK // r * entry, fp8_ds)))
        coff = 2 if r == 4 else 1
        sb = STATE_BLOCKS.get(r, 8)
        out.append(Spec("swa", sb, _align(sb * 2 * coff * c.head_dim * 4, fp8_ds), coff * r))
        if r == 4:
            key = c.index_head_dim + c.index_head_dim // INDEX_QUANT_BLOCK * 4
            out.append(Spec("mla", MLA_BLOCK, _round_up(MLA_BLOCK // r * key, PAGE_ALIGN)))  # indexer pages always aligned
            out.append(Spec("swa", sb, _align(sb * 2 * coff * c.index_head_dim * 4, fp8_ds), coff * r))
    return out


def _approximate_gcd(values: list[int], lower: int) -> int:
    """kv_cache_utils._approximate_gcd: the divisor with the least upward padding (ties: larger)."""
    best, best_pad = lower, None
    for d in range(max(1, lower), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


@dataclass(frozen=True)
class Layout:
    groups: tuple[tuple[tuple[int, int, int], ...], ...]  # per group: (block, page, window) of each layer
    block_bytes: int  # bytes of one block id over every tensor

    @property
    def n_groups(self) -> int:
        return len(self.groups)


def layout(arch: ModelArch, ratios: tuple[int, ...], kv_bytes: int) -> Layout:
    specs = layer_specs(arch, ratios, kv_bytes)
    mla = [(s.block, s.page, 0) for s in specs if s.kind == "mla"]
    by_key: dict[tuple[int, int], list[Spec]] = defaultdict(list)
    for s in specs:
        if s.kind == "swa":
            by_key[(s.block, s.window)].append(s)
    swa_groups = list(by_key.values())
    counts = [Counter(p for _, p, _ in mla).most_common(1)[0][1]] + [
        Counter(s.page for s in g).most_common(1)[0][1] for g in swa_groups]
    tuples = _approximate_gcd(counts, counts[0])
    mla_pages = sorted({p for _, p, _ in mla})
    groups = [tuple(mla)]
    for g in swa_groups:
        per_size: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for s in g:
            cand = min((p for p in mla_pages if p >= s.page), default=s.page)
            per_size[cand].append((s.block, cand, s.window))
        n = len(next(iter(per_size.values())))
        k = _cdiv(n, tuples)
        rows = list(zip(*per_size.values()))
        for i in range(k):
            groups.append(tuple(x for row in rows[i::k] for x in row))
    slots: dict[int, int] = defaultdict(int)
    for g in groups:
        for page, n in Counter(p for _, p, _ in g).items():
            slots[page] = max(slots[page], n)
    return Layout(tuple(groups), sum(p * n for p, n in slots.items()))


def blocks_per_request(lay: Layout, length: int, inflight: int) -> int:
    """cdiv(Σ_groups max pages per request × group page bytes, first group's page bytes)."""
    total = 0
    for g in lay.groups:
        pages = 0
        for block, _, window in g:
            if window:
                pages = max(pages, _cdiv(min(window - 1 + inflight, length), block) + 1)
            else:
                pages = max(pages, _cdiv(length, block))
        total += pages * sum(p for _, p, _ in g)
    return _cdiv(total, sum(p for _, p, _ in lay.groups[0]))


def stage_ratios(arch: ModelArch, pp: int) -> list[tuple[int, ...]]:
    ratios, out, start = arch.compressed.ratios, [], 0
    for n in pp_partition(arch.num_hidden_layers, pp):
        out.append(ratios[start:start + n])
        start += n
    return out


# --------------------------------------------------------------------------
# Weights


def layer_params(arch: ModelArch, layer: int) -> dict[str, int]:
    """Parameters of one decoder layer by how vLLM stores and shards them:
    attn_rep / attn_split (fp8 linears, replicated / split over TP), plain
    (bf16: compressor projections, norms, router), fp32 (ape, hyper-connections,
    sinks, score bias), int32 (the hash table), experts, shared."""
    c, h = arch.compressed, arch.hidden_size
    heads, r, m = arch.num_attention_heads, c.ratios[layer], arch.moe
    inter = m.moe_intermediate_size or arch.intermediate_size
    mix, hc_dim = (2 + c.hc_mult) * c.hc_mult, c.hc_mult * h
    p = {
        "attn_rep": h * (c.q_lora_rank + c.head_dim),  # fused_wqa_wkv
        "attn_split": c.q_lora_rank * heads * c.head_dim + heads * c.head_dim * c.o_lora_rank  # wq_b, wo_a
        + c.o_groups * c.o_lora_rank * h,  # wo_b
        "plain": c.q_lora_rank + c.head_dim + 2 * h + h * m.num_experts,  # norms, gate
        "fp32": heads + 2 * mix * hc_dim + 2 * mix + 6,  # attn_sink, hc_{attn,ffn}_*
        "int32": arch.vocab_size * m.num_experts_per_tok if layer < c.num_hash_layers else 0,  # tid2eid
        "experts": m.num_experts * 3 * h * inter,
        "shared": m.num_shared_experts * 3 * h * inter,
    }
    if layer >= c.num_hash_layers:
        p["fp32"] += m.num_experts  # e_score_correction_bias
    if r > 1:
        coff = 2 if r == 4 else 1
        p["plain"] += h * 2 * coff * c.head_dim + c.head_dim  # compressor fused_wkv_wgate, norm
        p["fp32"] += r * coff * c.head_dim  # ape
    if r == 4:  # indexer: wq_b (replicated fp8), weights_proj (bf16), its compressor
        p["attn_rep"] += c.q_lora_rank * c.index_n_heads * c.index_head_dim
        p["plain"] += h * c.index_n_heads + h * 4 * c.index_head_dim + c.index_head_dim
        p["fp32"] += 4 * 2 * c.index_head_dim
    return p


def _layer_bytes(arch: ModelArch, fmt: WeightFormat, tp: int, layer: int, expert_parallel: bool, ep_size: int = 0) -> float:
    p = layer_params(arch, layer)
    attn, lin, plain = _scheme_bytes(fmt, "attention"), _scheme_bytes(fmt, "linear"), _scheme_bytes(fmt, "plain")
    m = arch.moe
    share = -(-m.num_experts // max(ep_size, tp)) / m.num_experts if expert_parallel else 1 / tp
    experts = p["experts"] * _scheme_bytes(fmt, "expert") * share
    if (fmt.expert_scheme or fmt.scheme) == "mxfp4":  # the MXFP4 kernels' padding, as for gpt-oss
        h, i = arch.hidden_size, (m.moe_intermediate_size or arch.intermediate_size) // (1 if expert_parallel else tp)
        experts *= _round_up(h, MXFP4_HIDDEN_ALIGN) * _round_up(i, MXFP4_INTER_ALIGN) / (h * i)
    return (p["attn_rep"] * attn + p["attn_split"] * attn / tp + p["plain"] * plain + 4 * (p["fp32"] + p["int32"])
            + experts + p["shared"] * lin / tp)


def weight_stages(arch: ModelArch, fmt: WeightFormat, tp: int, pp: int, tokens: int,
                  expert_parallel: bool = False, ep_size: int = 0) -> tuple[list[float], float]:
    """(bytes per GPU of each pipeline stage, bytes of the whole model)."""
    c, h = arch.compressed, arch.hidden_size
    plain = _scheme_bytes(fmt, "plain")
    vocab = _padded_vocab(arch.vocab_size or 0)
    stages, start = [], 0
    for s, n in enumerate(pp_partition(arch.num_hidden_layers, pp)):
        rs = c.ratios[start:start + n]
        b = sum(_layer_bytes(arch, fmt, tp, i, expert_parallel, ep_size) for i in range(start, start + n))
        b += c.hc_mult * c.hc_mult * h * 4 + c.hc_mult * 4 + 4  # hc_head_{fn,base,scale}
        b += tokens * c.index_topk * 4  # topk_indices_buffer
        b += ((1 in rs) + any(r > 1 for r in rs)) * c.rope_positions * c.rope_head_dim * 4  # cos/sin caches
        if s == 0:
            b += vocab * h / tp * plain
        if s == pp - 1:
            b += vocab * h / tp * plain + h * plain + tokens * c.hc_mult * h * 2  # lm_head, norm, MTP hidden buffer
        stages.append(b)
        start += n
    total = sum(_layer_bytes(arch, fmt, 1, i, False) for i in range(arch.num_hidden_layers)) + 2 * vocab * h * plain
    return stages, total


def kv_token_bytes(arch: ModelArch, kv_bytes: int, ratios: Optional[tuple[int, ...]] = None) -> float:
    """Bytes one token of context adds per GPU (the compressed caches; the
    sliding caches are bounded by their window)."""
    c = arch.compressed
    entry = FP8_DS_ENTRY if kv_bytes == 1 else c.head_dim * kv_bytes
    key = c.index_head_dim + c.index_head_dim // INDEX_QUANT_BLOCK * 4
    return sum(entry / r + (key / r if r == 4 else 0) for r in (ratios or c.ratios) if r > 1)


# --------------------------------------------------------------------------
# Capacity (llmctl.sizing.kv dispatches here for DeepSeek V4)


def capacity(arch: ModelArch, stage_kv_bytes: list[float], length: int, pp: int, kv_bytes: int,
             inflight: int) -> tuple[int, float, int, int]:
    """(num_blocks, concurrency, blocks per request, groups) on the stage that
    holds the fewest requests; each stage is laid out from its own layers."""
    best = None
    for rs, avail in zip(stage_ratios(arch, pp), stage_kv_bytes):
        lay = layout(arch, rs, kv_bytes)
        blocks = int(max(0.0, avail) // lay.block_bytes)
        bpr = blocks_per_request(lay, length, inflight)
        conc = blocks / bpr if bpr else 0.0
        if best is None or conc < best[1]:
            best = (blocks, conc, bpr, lay.n_groups)
    return best


def one_request_bytes(arch: ModelArch, length: int, pp: int, kv_bytes: int, inflight: int) -> float:
    """KV bytes per GPU (most loaded stage) one request of ``length`` tokens needs."""
    return max(blocks_per_request(layout(arch, rs, kv_bytes), length, inflight) * layout(arch, rs, kv_bytes).block_bytes
               for rs in stage_ratios(arch, pp))
