"""`infolm`: InfoLM (Colombo et al. 2022) with a user-supplied masked language model, as torchmetrics.

Each sentence becomes a distribution over the vocabulary: every token that is
not special (``[CLS]``, ``[SEP]``, ``[PAD]``) is masked in turn and the
model's ``softmax(logits / temperature)`` at that position is averaged over
the positions (weighted by the token's IDF with ``idf=True``). A pair's score
is an information measure between the hypothesis distribution ``p`` and the
reference distribution ``q``; the value is the mean over pairs.

State: without IDF every pair's score is final once its sentences are seen,
so the network runs in `update` and the state is a float64 sum of the scores
and an int64 pair count (plus the scores themselves, as chunks, with
``return_sentence_level_score``): it merges by addition. With IDF a
sentence's distribution depends on document frequencies over the whole
corpus, and keeping each token's vocabulary distribution until then would
cost ``tokens x vocabulary`` floats; the state keeps the token ids (int64
chunks, ``O(tokens)``) and the network runs in `finalize` over the whole
corpus, as torchmetrics' class does. Both merge exactly.
"""
from __future__ import annotations

from typing import Any, Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.networks import evaluating
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks, merge_fields
from fmetrics.text._common import pair_lists

__all__ = ["infolm"]

Measure = Literal["kl_divergence", "alpha_divergence", "beta_divergence", "ab_divergence", "renyi_divergence",
                  "l1_distance", "l2_distance", "l_infinity_distance", "fisher_rao_distance"]
_HIGHER_IS_BETTER = {"kl_divergence": True, "alpha_divergence": True}  # the others are >= 0, lower is better


class InfoLMState(NamedTuple):
    score: torch.Tensor  # float64 (): sum of the pair scores (idf=False)
    pairs: torch.Tensor  # int64 (): pairs seen
    sentences: Any       # float64 chunks: the pair scores (idf=False with return_sentence_level_score)
    preds_ids: Any       # int64 chunks: every hypothesis' token ids, specials included (idf=True)
    preds_lens: Any      # int64 chunks: tokens per hypothesis (idf=True)
    target_ids: Any
    target_lens: Any


def _measure(kind: str, alpha: float, beta: float):
    """The information measure ``f(p, q)`` over the last dimension (torchmetrics' definitions, NaN -> 0)."""
    def ab(p, q, a, b):
        return (torch.log((q ** (a + b)).sum(-1)) / (b * (a + b)) + torch.log((p ** (a + b)).sum(-1)) / (a * (a + b))
                - torch.log((q ** a * p ** b).sum(-1)) / (a * b))

    fns = {
        "kl_divergence": lambda p, q: (q * torch.log(p / q)).sum(-1),
        "alpha_divergence": lambda p, q: (1 - (q ** alpha * p ** (1 - alpha)).sum(-1)) / (alpha * (alpha - 1)),
        "beta_divergence": lambda p, q: ab(p, q, 1.0, beta),
        "ab_divergence": lambda p, q: ab(p, q, alpha, beta),
        "renyi_divergence": lambda p, q: torch.log((q ** alpha * p ** (1 - alpha)).sum(-1)) / (alpha - 1),
        "l1_distance": lambda p, q: (q - p).abs().sum(-1),
        "l2_distance": lambda p, q: (q - p).pow(2).sum(-1).sqrt(),
        "l_infinity_distance": lambda p, q: (q - p).abs().amax(-1),
        "fisher_rao_distance": lambda p, q: 2 * torch.acos(torch.sqrt(p * q).sum(-1).clamp(0, 1)),
    }
    fn = fns[kind]
    return lambda p, q: torch.nan_to_num(fn(p, q))


def _check_params(name: str, kind: str, alpha, beta) -> tuple:
    def number(arg, v, needed_by, bad=()):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or abs(v) == float("inf"):
            raise validation.fail(name, arg, f"a finite number for information_measure={needed_by!r}", repr(v))
        if float(v) in bad:
            raise validation.fail(name, arg, f"a number other than {' and '.join(map(str, bad))} for "
                                  f"information_measure={needed_by!r}", repr(v))
        return float(v)

    a = number("alpha", alpha, kind, {"alpha_divergence": (0.0, 1.0), "renyi_divergence": (1.0,),
                                      "ab_divergence": (0.0,)}.get(kind, ())) \
        if kind in ("alpha_divergence", "ab_divergence", "renyi_divergence") else 0.0
    b = number("beta", beta, kind, {"beta_divergence": (0.0, -1.0), "ab_divergence": (0.0,)}[kind]) \
        if kind in ("beta_divergence", "ab_divergence") else 0.0
    if kind == "ab_divergence" and a + b == 0:
        raise validation.fail(name, "beta", "alpha + beta != 0 for information_measure='ab_divergence'",
                              f"alpha={alpha!r}, beta={beta!r}")
    return a, b


def _logits(name: str, out: Any) -> torch.Tensor:
    logits = out if isinstance(out, torch.Tensor) else getattr(out, "logits", None)
    if logits is None and isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        logits = out[0]
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        got = f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) else type(out).__name__
        raise validation.fail(name, "model", "a masked language model returning logits (batch, tokens, vocabulary) "
                              "(a tensor or an output with `.logits`)", got)
    return logits


@factory
def infolm(*, model: torch.nn.Module, tokenizer: Any, temperature: float = 0.25,
           information_measure: Measure = "kl_divergence", idf: bool = True, alpha: Optional[float] = None,
           beta: Optional[float] = None, max_length: Optional[int] = None, batch_size: int = 64,
           num_threads: int = 0, return_sentence_level_score: bool = False) -> Metric:
    """InfoLM: the mean over sentence pairs of an information measure between masked-LM token distributions.

    ``p = sum_k w_k softmax(LM(h with token k masked)_k / temperature) / sum_k w_k``
    over the hypothesis' non-special tokens ``k`` (``w_k = 1``, or the token's
    IDF ``log((N + 1) / (df + 1))`` over the ``N`` hypotheses seen with
    ``idf``); ``q`` the same for the reference (IDF over the references). Per
    pair: ``kl_divergence`` ``sum q log(p / q)`` (torchmetrics' sign: <= 0),
    ``alpha_divergence`` ``(1 - sum q^a p^(1-a)) / (a (a - 1))``,
    ``ab_divergence`` ``log sum q^(a+b) / (b (a+b)) + log sum p^(a+b) / (a (a+b))
    - log sum q^a p^b / (a b)``, ``beta_divergence`` the same with ``a = 1``,
    ``renyi_divergence`` ``log sum q^a p^(1-a) / (a - 1)``, ``l1_distance`` /
    ``l2_distance`` / ``l_infinity_distance`` norms of ``q - p``,
    ``fisher_rao_distance`` ``2 acos(sum sqrt(p q))``; a NaN score counts as 0
    (torchmetrics' ``nan_to_num``).

    Args:
      model: the masked language model (a parameter of the metric: moved by
        ``metric.to``), called ``model(input_ids, attention_mask=mask)`` and
        returning logits ``(batch, tokens, vocabulary)`` (a tensor or an output
        with ``.logits``, e.g. ``transformers.BertForMaskedLM``); run in eval
        mode under no-grad on its own device. Nothing is downloaded.
      tokenizer: its tokenizer: ``tokenizer(texts, max_length=n,
        truncation=True)["input_ids"]`` gives token id lists with the special
        tokens; ``mask_token_id``, ``pad_token_id``, ``cls_token_id``,
        ``sep_token_id`` (e.g. ``transformers.BertTokenizer``).
      temperature: the softmax temperature (default 0.25), > 0.
      information_measure: one of the nine measures above (default
        ``"kl_divergence"``).
      idf: weight the masked positions by IDF over the corpus (default
        ``True``, as torchmetrics); the network then runs in `finalize`.
      alpha: ``a`` of the alpha, AB and Rényi divergences (required there;
        not 0 or 1 for alpha, not 1 for Rényi, not 0 for AB).
      beta: ``b`` of the beta and AB divergences (required there; not 0 or
        -1 for beta, not 0 for AB; ``a + b != 0``).
      max_length: longest token sequence, special tokens included (longer
        ones are truncated); default ``None``: the model config's
        ``max_length`` where it has one (torchmetrics' rule), else its
        ``max_position_embeddings``, else 512.
      batch_size: masked sequences per model call (default 64).
      num_threads: accepted for torchmetrics' signature (its data-loader
        workers); tokenizing runs in this process, so it changes nothing.
      return_sentence_level_score: also return every pair's score.

    Inputs:
      ``update(state, preds, target)``: hypothesis strings and one reference
      string per hypothesis (a string is one sentence); each must have a token
      besides the special ones.

    Returns:
      float64 scalar; with ``return_sentence_level_score`` the tuple ``(mean,
      pair scores)``. An empty corpus gives NaN with a warning.

    Example::

        >>> class Tok:  # a Hugging Face style tokenizer: [PAD] 0, [CLS] 1, [SEP] 2, [MASK] 3, words 4..7
        ...     pad_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 1, 2, 3
        ...     ids = {"the": 4, "cat": 5, "sat": 6, "down": 7}
        ...     def __call__(self, texts, max_length, truncation=True):
        ...         return {"input_ids": [[1] + [self.ids[w] for w in t.split()] + [2] for t in texts]}
        >>> class LM(torch.nn.Module):  # token embedding plus the sentence mean, scored against the vocabulary
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.emb = torch.nn.Embedding(8, 4)
        ...     def forward(self, input_ids, attention_mask):
        ...         h = self.emb(input_ids)
        ...         return (h + h.mean(1, keepdim=True)) @ self.emb.weight.T
        >>> _ = torch.manual_seed(0)
        >>> m = fmetrics.infolm(model=LM(), tokenizer=Tok(), idf=False, max_length=16)
        >>> m(["the cat sat"], ["the cat sat down"])
        tensor(-0.0160, dtype=torch.float64)
    """
    name = "infolm"
    if isinstance(model, (str, bytes)) or not isinstance(model, torch.nn.Module):
        raise validation.fail(name, "model", "a masked language model module, built by you (e.g. "
                              "transformers.AutoModelForMaskedLM.from_pretrained(folder): nothing is downloaded)",
                              type(model).__name__)
    if not callable(tokenizer):
        raise validation.fail(name, "tokenizer", "a callable Hugging Face style tokenizer", type(tokenizer).__name__)
    for attr in ("mask_token_id", "pad_token_id", "cls_token_id", "sep_token_id"):
        if not isinstance(getattr(tokenizer, attr, None), int):
            raise validation.fail(name, "tokenizer", f"a tokenizer with an integer `{attr}` (a masked LM's tokenizer)",
                                  f"{type(tokenizer).__name__} without one")
    validation.check_policy(name, "information_measure", information_measure, Measure.__args__)
    a, b = _check_params(name, information_measure, alpha, beta)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < float("inf"):
        raise validation.fail(name, "temperature", "a finite number > 0", repr(temperature))
    if max_length is None:
        config = getattr(model, "config", None)
        max_length = getattr(config, "max_length", None) or getattr(config, "max_position_embeddings", None) or 512
    for arg, v, lo in (("max_length", max_length, 1), ("batch_size", batch_size, 1), ("num_threads", num_threads, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise validation.fail(name, arg, "a positive integer" if lo else "a non-negative integer", repr(v))
    idf, sentence_level, temperature = bool(idf), bool(return_sentence_level_score), float(temperature)
    mask_id, pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id
    special = sorted({pad_id, tokenizer.cls_token_id, tokenizer.sep_token_id})
    measure = _measure(information_measure, a, b)

    def device() -> torch.device:
        return next((p.device for p in model.parameters()), torch.device("cpu"))

    def tokenize(arg: str, texts: list) -> list:
        ids = [list(map(int, x)) for x in tokenizer(list(texts), max_length=max_length, truncation=True)["input_ids"]]
        for k, (t, x) in enumerate(zip(texts, ids)):
            if not t.strip() or all(i in special for i in x):
                raise validation.fail(name, arg, "non-empty texts (a token besides the special ones)",
                                      f"{t!r} at position {k}")
        return ids

    def distributions(seqs: list, weights: Optional[torch.Tensor]) -> torch.Tensor:
        """``(len(seqs), vocabulary)`` float64: each sentence's (weighted) mean masked-token distribution."""
        lens = torch.tensor([len(x) for x in seqs])
        ids = torch.full((len(seqs), int(lens.max())), pad_id, dtype=torch.long)
        for i, x in enumerate(seqs):
            ids[i, :len(x)] = torch.tensor(x, dtype=torch.long)
        keep = torch.arange(ids.shape[1]) < lens[:, None]
        for t in special:
            keep &= ids.ne(t)
        sent, pos = keep.nonzero(as_tuple=True)
        order = torch.argsort(lens[sent], descending=True, stable=True)  # rows of similar lengths: little padding
        sent, pos = sent[order], pos[order]
        dev, num, den = device(), None, torch.zeros(len(seqs), dtype=torch.float64)
        for lo in range(0, sent.numel(), batch_size):
            s, k = sent[lo:lo + batch_size], pos[lo:lo + batch_size]
            width = int(lens[s[0]])
            x = ids[s, :width].clone()
            token = x[torch.arange(len(s)), k]
            x[torch.arange(len(s)), k] = mask_id
            mask = (torch.arange(width) < lens[s][:, None]).long()
            with torch.no_grad():
                out = _logits(name, model(x.to(dev), attention_mask=mask.to(dev)))
            row = out[torch.arange(len(s), device=dev), k.to(dev)].double().cpu()
            if not bool(torch.isfinite(row).all()):
                raise ValueError(f"{name}: the model returned non-finite logits for {int((~torch.isfinite(row)).any(1).sum())} "
                                 "masked tokens (check the network's weights and dtype); the state is unchanged")
            prob = torch.softmax(row / temperature, dim=-1)
            w = torch.ones(len(s), dtype=torch.float64) if weights is None else weights[token]
            num = torch.zeros(len(seqs), prob.shape[1], dtype=torch.float64) if num is None else num
            num.index_add_(0, s, prob * w[:, None])
            den.index_add_(0, s, w)
        return num / den[:, None]

    def scores(hyps: list, refs: list, wp=None, wt=None) -> torch.Tensor:
        out = []
        with evaluating(model):  # eval mode for the calls; the user's flags are restored after them
            for lo in range(0, len(hyps), batch_size):
                out.append(measure(distributions(hyps[lo:lo + batch_size], wp),
                                   distributions(refs[lo:lo + batch_size], wt)))
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)

    def init() -> InfoLMState:
        return InfoLMState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                           (), (), (), (), ())

    def update(s: InfoLMState, preds, target) -> InfoLMState:
        hyps, refs = pair_lists(name, preds, target)
        if not hyps:
            return InfoLMState(s.score.clone(), s.pairs.clone(), (), (), (), (), ())
        hyp_ids, ref_ids = tokenize("preds", hyps), tokenize("target", refs)
        n = s.pairs + len(hyps)
        if idf:
            def chunk(seqs):
                return ((torch.tensor([i for x in seqs for i in x], dtype=torch.int64),),
                        (torch.tensor([len(x) for x in seqs], dtype=torch.int64),))
            return InfoLMState(s.score.clone(), n, (), *chunk(hyp_ids), *chunk(ref_ids))
        v = scores(hyp_ids, ref_ids)
        return InfoLMState(s.score + v.sum().to(s.score), n, (v,) if sentence_level else (), (), (), (), ())

    def idf_weights(ids: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        """``log((N + 1) / (df + 1))`` per token id over the ``N`` sentences (torchmetrics' IDF)."""
        vocab = int(ids.max()) + 1
        sent = torch.repeat_interleave(torch.arange(lens.numel()), lens)
        df = torch.bincount(torch.unique(sent * vocab + ids) % vocab, minlength=vocab)
        return torch.log((lens.numel() + 1) / (df.double() + 1))

    def split(ids: torch.Tensor, lens: torch.Tensor) -> list:
        return [x.tolist() for x in torch.split(ids, lens.tolist())]

    def finalize(s: InfoLMState):
        if int(s.pairs) == 0:
            validation.warn_empty(name, stacklevel=3)
        if idf and int(s.pairs):
            e = torch.zeros(0, dtype=torch.int64)
            pi, pl = cat_chunks(s.preds_ids, e), cat_chunks(s.preds_lens, e)
            ti, tl = cat_chunks(s.target_ids, e), cat_chunks(s.target_lens, e)
            v = scores(split(pi, pl), split(ti, tl), idf_weights(pi, pl), idf_weights(ti, tl))
            mean = v.mean()
        else:
            v = cat_chunks(s.sentences, torch.zeros(0, dtype=torch.float64))
            mean = s.score / s.pairs
        return (mean, v) if sentence_level else mean

    tags = InfoLMState("sum", "sum", "cat", "cat", "cat", "cat", "cat")
    vocab = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    fingerprint = (type(tokenizer).__qualname__, vocab, mask_id, tuple(special), max_length)
    if idf:  # the state is token ids: metrics over one tokenizer share it, whatever their network and measure
        key = ("infolm-idf", fingerprint)
    else:
        with torch.no_grad():
            checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
        net = (type(model).__qualname__, sum(p.numel() for p in model.parameters()), round(checksum, 6))
        key = ("infolm", fingerprint, net, temperature, information_measure, a, b, sentence_level)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name, state_key=key,
                  reductions=tags, higher_is_better=_HIGHER_IS_BETTER.get(information_measure, False),
                  is_differentiable=False, bounds=(None, None), host_input=True)
