"""A tiny random masked language model and word-level tokenizer, built offline (InfoLM's tests and benchmark).

`tiny_mlm(folder)` writes a vocabulary file, builds a ``transformers.BertTokenizer`` over it and a randomly
initialised ``transformers.BertForMaskedLM`` (2 layers, width 32), and saves both to ``folder``
(``save_pretrained``), so a peer (torchmetrics' ``infolm(model_name_or_path=folder)``) loads the same network
from disk. Nothing is downloaded.
"""
from __future__ import annotations

import os

import torch

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a cat dog sat on mat is was there house running runs ran quickly , . ! ? ; : ' ( ) "
         "he she read book because interested in world history of and to it red blue big small tree car "
         "1 2 3 4 5 6 7 8 9 0 café é").split()


def tiny_mlm(folder: str, seed: int = 0, hidden: int = 32, layers: int = 2, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)``: a random tiny BERT masked LM (eval mode, ``dtype``) and its tokenizer, saved to
    ``folder``. A float64 network makes a peer that computes in the network's dtype exact to ~1e-12."""
    import transformers

    vocab = SPECIAL + sorted(set(WORDS), key=WORDS.index)
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = transformers.BertTokenizer(path, do_lower_case=True)
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers,
                                     num_attention_heads=2, intermediate_size=2 * hidden,
                                     max_position_embeddings=64, pad_token_id=0)
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():  # a livelier random network: logits of a few units, so the distributions differ
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    model = model.to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer
