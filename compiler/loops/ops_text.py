"""Lowering of TfIdfVectorizer over integer token ids.

Semantics: the ONNX TfIdfVectorizer spec. The pool holds, per gram length ``n`` (``ngram_counts``
gives where each length starts in ``pool_int64s``), the n-grams to count; ``ngram_indexes`` maps
pool entry ``j`` to its output column. An n-gram of length ``n`` with skip ``s`` starting at ``i``
is the tokens ``x[i], x[i + (s + 1)], ..., x[i + (n - 1)(s + 1)]``; every skip from 0 to
``max_skip_count`` counts (for unigrams the skip does not matter: counted once), for lengths from
``min_gram_length`` to ``max_gram_length``. Output: ``TF`` the counts, ``IDF`` ``min(count, 1) *
weight``, ``TFIDF`` ``count * weight`` (weights default 1). Each output column sums, over the
pool entries mapped to it, a reduction over (skip, start) of the match indicator.
"""

from __future__ import annotations

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, Reduce, add, emin, mul, select
from .registry import LowerCtx, bad, register
from .tensor import Tensor


@register("TfIdfVectorizer", complex_op=True)
def _tfidf(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    pool = node.attr("pool_int64s", None)
    if pool is None:
        raise bad(node, "pool_strings", "string pools are not supported (integer token ids only)")
    pool = [int(v) for v in pool]
    counts = [int(v) for v in node.attr("ngram_counts")]
    indexes = [int(v) for v in node.attr("ngram_indexes")]
    lo, hi = int(node.attr("min_gram_length")), int(node.attr("max_gram_length"))
    max_skip = int(node.attr("max_skip_count"))
    mode = node.attr_str("mode", "TF")
    weights = node.attr("weights", None)
    weights = [float(w) for w in weights] if weights is not None else [1.0] * len(indexes)
    entries = []  # (output column, tokens, weight)
    for g, start in enumerate(counts):
        n = g + 1
        end = counts[g + 1] if g + 1 < len(counts) else len(pool)
        for k in range((end - start) // n):
            entries.append((n, pool[start + k * n:start + (k + 1) * n]))
    out = ctx.out_shape(node)
    seq = x.shape[-1]
    two_d = x.rank == 2
    tok_dt = x.dtype

    def fn(i: list[Expr]) -> Expr:
        col = i[-1]
        row = i[:-1]
        total: Expr = Float(0.0)
        for e, (n, toks) in enumerate(entries):
            if not lo <= n <= hi:
                continue
            skips = range(max_skip + 1) if n > 1 else range(1)
            cnt: Expr = Int(0)
            for s in skips:
                span = (n - 1) * (s + 1)
                if span >= seq:
                    continue
                rs = ctx.lowering.axis("rt", seq - span)
                hit: Expr | None = None
                for t, tok in enumerate(toks):
                    v = x[row + [add(rs[0], t * (s + 1))]] if two_d else x[[add(rs[0], t * (s + 1))]]
                    c = Bin("==", v, Int(tok, tok_dt))
                    hit = c if hit is None else Bin("and", hit, c)
                assert hit is not None
                cnt = add(cnt, Reduce("sum", (rs,), select(hit, Int(1), Int(0)), Int(0)))
            val: Expr = Cast("f32", cnt)
            if mode == "IDF":
                val = mul(Cast("f32", emin(cnt, Int(1))), Float(weights[e]))
            elif mode == "TFIDF":
                val = mul(val, Float(weights[e]))
            total = add(total, select(Bin("==", col, Int(indexes[e])), val, Float(0.0)))
        return total
    return [Tensor(out, "f32", fn)]

