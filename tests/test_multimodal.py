"""Multimodal metrics against torchmetrics 1.9 on the same tiny random CLIP network, and LVE against the formula.

The CLIP network is built offline (tests/cases/multimodal.py: random weights, a character-level tokenizer),
saved with ``save_pretrained`` and loaded back by torchmetrics from that folder, so both libraries run the same
weights. torchmetrics 1.9 expects ``get_*_features`` to return tensors, which ``transformers`` 5 no longer does
(it returns an output whose ``pooler_output`` holds them): torchmetrics gets a thin wrapper returning that tensor.
"""
import pickle
import tempfile
import warnings

import pytest
import torch

import fmetrics
from tests.cases.multimodal import TensorFeatures, captions, float_processor, images, lve_reference, tiny_clip

transformers = pytest.importorskip("transformers")
tmm = pytest.importorskip("torchmetrics.multimodal")
tmf = pytest.importorskip("torchmetrics.functional.multimodal")


@pytest.fixture(scope="module")
def clip():
    folder = tempfile.mkdtemp(prefix="fmetrics-clip-test-")
    model, processor = tiny_clip(folder, seed=3)
    loaded = TensorFeatures(transformers.CLIPModel.from_pretrained(folder).eval())
    return model, processor, lambda: (loaded, transformers.CLIPProcessor.from_pretrained(folder))


def _inputs(kind, g, n, sizes=False):
    if kind == "text":
        return captions(g, n)
    if sizes:  # a list of images of different sizes
        return [images(g, 1, h=int(h), w=int(w))[0] for h, w in torch.randint(20, 60, (n, 2), generator=g)]
    return images(g, n)


@pytest.mark.parametrize("kinds", [("image", "text"), ("text", "image"), ("image", "image"), ("text", "text")])
def test_clip_score_matches_torchmetrics(clip, kinds):
    model, processor, load = clip
    g = torch.Generator().manual_seed(len(kinds[0]) + 7 * len(kinds[1]))
    batches = [(_inputs(kinds[0], g, n, sizes=True), _inputs(kinds[1], g, n)) for n in (5, 1, 9)]
    m = fmetrics.clip_score(model=model, processor=processor)
    s = m.init()
    for b in batches:
        s = m.update(s, *b)
    tm = tmm.CLIPScore(model_name_or_path=load)
    for b in batches:
        tm.update(*b)
    want = tm.compute()
    got = m.finalize(s)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want.double(), rtol=1e-6, atol=1e-6)
    one = tmf.clip_score(*batches[0], model_name_or_path=load)  # the functional form, one batch
    torch.testing.assert_close(m(*batches[0]), one.double(), rtol=1e-6, atol=1e-6)


def _pair_scores(model, processor, imgs, texts):
    """The published per-pair score by hand: 100 * cos of the projected CLIP embeddings."""
    with torch.no_grad():
        a = model.get_image_features(processor(images=list(imgs), return_tensors="pt")["pixel_values"]).pooler_output
        t = processor(text=texts, return_tensors="pt", padding=True)
        b = model.get_text_features(t["input_ids"], t["attention_mask"]).pooler_output
    return 100 * torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


def test_clip_score_clamps_the_mean_or_each_pair(clip):
    model, processor, _ = clip
    g = torch.Generator().manual_seed(11)
    imgs, texts = images(g, 16), captions(g, 16)
    pair = _pair_scores(model, processor, imgs, texts)
    assert (pair < 0).any() and (pair > 0).any()  # the random network gives both signs: the two rules differ
    got_pair = fmetrics.clip_score(model=model, processor=processor, clamp="pair")(imgs, texts)
    got_mean = fmetrics.clip_score(model=model, processor=processor)(imgs, texts)
    torch.testing.assert_close(got_pair, pair.clamp_min(0).mean(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_mean, pair.mean().clamp_min(0), rtol=1e-6, atol=1e-6)


class Fixed:
    """A CLIP-style network returning fixed embeddings: images (1, 0), texts (-1, 0) or (1, 1) by caption."""

    def get_image_features(self, pixel_values):
        return torch.tensor([[1.0, 0.0]]).repeat(pixel_values.shape[0], 1)

    def get_text_features(self, input_ids, attention_mask):
        return torch.where(input_ids[:, :1] == 0, torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 1.0]))


def fixed_processor(text=None, images=None, **kwargs):
    if images is not None:
        return {"pixel_values": torch.stack([i.float() for i in images])}
    return {"input_ids": torch.tensor([[0 if t == "opposite" else 1] for t in text]),
            "attention_mask": torch.ones(len(text), 1)}


def test_clip_score_negative_mean_is_clamped_at_zero():
    imgs = torch.zeros(3, 3, 2, 2)
    texts = ["opposite", "opposite", "diagonal"]  # cos -1, -1, 1/sqrt(2)
    mean = fmetrics.clip_score(model=Fixed(), processor=fixed_processor)
    pair = fmetrics.clip_score(model=Fixed(), processor=fixed_processor, clamp="pair")
    assert float(mean(imgs, texts)) == 0.0
    assert float(pair(imgs, texts)) == pytest.approx(100 / 2 ** 0.5 / 3, rel=1e-12)


@pytest.mark.parametrize("prompts", [("quality",), ("quality", "brightness", ("Sharp red photo.", "Blurry photo."))])
@pytest.mark.parametrize("rescaling", [True, False])
def test_clip_iqa_matches_torchmetrics(clip, prompts, rescaling):
    model, processor, load = clip
    data_range = 255.0 if rescaling else 1.0
    if not rescaling:
        processor = float_processor(processor)
        base = load

        def load():
            m, p = base()
            return m, float_processor(p)

    g = torch.Generator().manual_seed(5)
    batches = [torch.rand(n, 3, 40, 36, generator=g) * data_range for n in (4, 1, 6)]
    m = fmetrics.clip_image_quality_assessment(model=model, processor=processor, data_range=data_range,
                                               prompts=prompts)
    s = m.init()
    for b in batches:
        s = m.update(s, b)
    tm = tmm.CLIPImageQualityAssessment(model_name_or_path=load, data_range=data_range, prompts=prompts)
    for b in batches:
        tm.update(b)
    got, want = m.finalize(s), tm.compute()
    if len(prompts) == 1:
        assert got.shape == (11,)
        got, want = {"v": got}, {"v": want}
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == torch.float64
        torch.testing.assert_close(got[k], want[k].double(), rtol=1e-6, atol=1e-6)
    spread = torch.stack([v for v in got.values()]).std()
    # rescaling twice (images / data_range, then the processor's 1/255: torchmetrics' path) leaves every image
    # nearly black, so the scores barely differ; with do_rescale=False the images are told apart
    assert spread > 1e-4 or rescaling
    one = tmf.clip_image_quality_assessment(batches[1], model_name_or_path=load, data_range=data_range,
                                            prompts=prompts)
    got_one = m(batches[1])
    if len(prompts) == 1:  # one image, one prompt: a 0-d tensor, as torchmetrics
        assert got_one.shape == one.shape == ()
        got_one, one = {"v": got_one}, {"v": one}
    for k in one:
        torch.testing.assert_close(got_one[k], one[k].double(), rtol=1e-6, atol=1e-6)


def test_clip_iqa_prompt_embeddings_follow_in_place_weight_changes(clip):
    import copy

    model = copy.deepcopy(clip[0])
    m = fmetrics.clip_image_quality_assessment(model=model, processor=float_processor(clip[1]))
    x = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(9))
    before = m(x)
    with torch.no_grad():
        model.text_projection.weight.mul_(-1.5)  # an optimizer-like in-place step on the text side only
    after = m(x)
    fresh = fmetrics.clip_image_quality_assessment(model=copy.deepcopy(model), processor=float_processor(clip[1]))
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, fresh(x), rtol=0, atol=0)


def test_long_captions_are_truncated_as_torchmetrics(clip):
    model, processor, load = clip
    long = ["a very long caption " * 6, "short"]
    g = torch.Generator().manual_seed(2)
    imgs = images(g, 2)
    with pytest.warns(UserWarning, match="truncated"):
        got = fmetrics.clip_score(model=model, processor=processor)(imgs, long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = tmf.clip_score(imgs, long, model_name_or_path=load)
    torch.testing.assert_close(got, want.double(), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------ bad input: clear errors, state intact


def _rejects(m, s, *inputs, match):
    """The update raises ``match``; the state given to it is intact (it finalizes as before)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty state's NaN warning
        before = m.finalize(s)
        with pytest.raises(ValueError, match=match):
            m.update(s, *inputs)
        torch.testing.assert_close(m.finalize(s), before, equal_nan=True)


def test_clip_score_bad_input(clip):
    model, processor, _ = clip
    m = fmetrics.clip_score(model=model, processor=processor)
    g = torch.Generator().manual_seed(0)
    s = m.update(m.init(), images(g, 2), captions(g, 2))
    _rejects(m, s, images(g, 3), captions(g, 2), match=r"clip_score: argument `target` expected as many examples "
                                                        r"as source \(3\), got 2")
    _rejects(m, s, images(g, 2), ["a cat", "  "], match=r"clip_score: argument `target` expected non-empty texts")
    _rejects(m, s, images(g, 1).float() / 255, ["a cat"], match=r"argument `source` expected integer \(uint8\) "
                                                                  r"images \(the processor rescales by 1/255")
    _rejects(m, s, torch.full((1, 3, 8, 8), 300, dtype=torch.int64), ["a cat"], match=r"in \[0, 255\]")
    _rejects(m, s, ["a cat"], torch.ones(3, 5), match=r"images \(N, C, H, W\)")
    _rejects(m, s, ["a cat", torch.ones(3, 4, 4)], ["a", "b"], match="not a mix")
    f = fmetrics.clip_score(model=model, processor=float_processor(processor))
    _rejects(f, f.init(), torch.full((1, 3, 8, 8), float("nan")), ["a cat"], match=r"expected finite images")
    _rejects(f, f.init(), torch.full((1, 3, 8, 8), 2.0), ["a cat"], match=r"in \[0, 1\] \(the processor is built "
                                                                           r"with do_rescale=False\)")
    with pytest.raises(ValueError, match="argument `model` expected a CLIP-style network"):
        fmetrics.clip_score(model=torch.nn.Linear(2, 2), processor=processor)
    with pytest.raises(ValueError, match="argument `clamp` expected one of"):
        fmetrics.clip_score(model=model, processor=processor, clamp="none")


class NonFinite(Fixed):
    def get_image_features(self, pixel_values):
        return torch.full((pixel_values.shape[0], 2), float("nan"))


def test_non_finite_features_are_an_error():
    m = fmetrics.clip_score(model=NonFinite(), processor=fixed_processor)
    s = m.update(m.init(), ["diagonal"], ["diagonal"])
    _rejects(m, s, torch.zeros(2, 3, 2, 2), ["a", "b"], match="non-finite image features for 2 of 2 inputs")
    iqa = fmetrics.clip_image_quality_assessment(model=NonFinite(), processor=fixed_processor)
    with pytest.raises(ValueError, match="clip_image_quality_assessment: the model returned non-finite"):
        iqa(torch.zeros(1, 3, 2, 2))


def test_clip_iqa_bad_input(clip):
    model, processor, _ = clip
    m = fmetrics.clip_image_quality_assessment(model=model, processor=processor)
    s = m.update(m.init(), torch.rand(2, 3, 8, 8))
    _rejects(m, s, torch.rand(1, 3, 8, 8) * 2, match=r"argument `images` expected pixel values in \[0, 1\] "
                                                     r"\(data_range\)")
    _rejects(m, s, ["a cat"], match="argument `images` expected images")
    for bad in (("quality", "nonsense"), ("quality", ("only one",)), "quality", ()):
        with pytest.raises(ValueError, match="argument `prompts` expected"):
            fmetrics.clip_image_quality_assessment(model=model, processor=processor, prompts=bad)
    with pytest.raises(ValueError, match="argument `data_range` expected a positive finite number"):
        fmetrics.clip_image_quality_assessment(model=model, processor=processor, data_range=0)


def test_empty_input_rule(clip):
    model, processor, _ = clip
    m = fmetrics.clip_score(model=model, processor=processor)
    with pytest.warns(UserWarning, match="clip_score: no samples were seen"):
        assert torch.isnan(m.finalize(m.update(m.init(), [], [])))
    iqa = fmetrics.clip_image_quality_assessment(model=model, processor=processor, prompts=("quality", "new"))
    out = iqa.finalize(iqa.update(iqa.init(), torch.zeros(0, 3, 8, 8)))
    assert out["quality"].shape == (0,) and out["new"].dtype == torch.float64


def test_network_is_not_mutated_and_travels(clip):
    model, processor, _ = clip
    g = torch.Generator().manual_seed(4)
    imgs, texts = images(g, 3), captions(g, 3)
    m = fmetrics.clip_score(model=model, processor=processor)
    want = m(imgs, texts)
    model.train()
    try:
        assert torch.equal(m(imgs, texts), want)  # evaluated in eval mode ...
        assert model.training and all(x.training for x in model.modules())  # ... the user's flags untouched
    finally:
        model.eval()
    back = pickle.loads(pickle.dumps(m))  # the network travels with the metric (its recipe)
    torch.testing.assert_close(back(imgs, texts), want)
    moved = m.to("cpu")
    assert next(iter(moved.params.values())).__class__ is type(model)
    torch.testing.assert_close(moved(imgs, texts), want)


# ------------------------------------------------------------ lip vertex error


@pytest.mark.parametrize("seed", range(4))
def test_lve_matches_torchmetrics_and_the_formula(seed):
    g = torch.Generator().manual_seed(seed)
    v = int(torch.randint(6, 40, (), generator=g))
    mouth = torch.randint(v, (int(torch.randint(1, 8, (), generator=g)),), generator=g).tolist()  # repeats allowed
    batches = []
    for _ in range(3):
        t, t2 = (int(x) for x in torch.randint(1, 30, (2,), generator=g))  # different lengths: min(T, T') frames
        batches.append((torch.randn(t, v, 3, generator=g), torch.randn(t2, v, 3, generator=g) * 2))
    m = fmetrics.lip_vertex_error(mouth_map=mouth)
    s = m.init()
    for p, t in batches:
        s = m.update(s, p, t)
    tm = tmm.LipVertexError(mouth_map=mouth)
    for p, t in batches:
        tm.update(p, t)
    torch.testing.assert_close(m.finalize(s), tm.compute().double(), rtol=1e-6, atol=1e-6)
    n = [min(p.shape[0], t.shape[0]) for p, t in batches]
    hand = sum(float(lve_reference(p.double(), t.double(), mouth)) * k for (p, t), k in zip(batches, n)) / sum(n)
    assert float(m.finalize(s)) == pytest.approx(hand, rel=1e-9)
    p, t = batches[0]
    torch.testing.assert_close(m(p, t), tmf.lip_vertex_error(p, t, mouth).double(), rtol=1e-6, atol=1e-6)


def test_lve_nasty_cases():
    x = torch.randn(5, 10, 3, dtype=torch.float64)
    m = fmetrics.lip_vertex_error(mouth_map=[1, 2])
    assert float(m(x, x)) == 0.0
    y = x.clone()
    y[:, 7] += 100  # outside the mouth: no effect
    assert float(m(x, y)) == 0.0
    y[3, 2, 0] += 4  # one frame, one mouth vertex: 16 / 5 frames
    assert float(m(x, y)) == pytest.approx(16 / 5, rel=1e-12)
    with pytest.warns(UserWarning, match="lip_vertex_error: no samples were seen"):
        assert torch.isnan(m(x[:0], x[:0]))
    s = m.update(m.init(), x, y)
    bad = y.clone()
    bad[0, 0, 0] = float("nan")
    _rejects(m, s, x, bad, match=r"lip_vertex_error: vertices_gt must be finite")
    ign = fmetrics.lip_vertex_error(mouth_map=[1, 2], nan_strategy="ignore")
    assert float(ign(x, bad)) == pytest.approx(16 / 4, rel=1e-12)  # the NaN frame is left out
    _rejects(m, s, x[:, :2], y[:, :2], match=r"argument `mouth_map` expected vertex indices below 2")
    _rejects(m, s, x[0], y[0], match=r"argument `vertices_pred` expected a tensor \(frames, vertices, 3\)")
    _rejects(m, s, x, y[:, :9], match=r"argument `vertices_gt` expected 10 vertices")
    for mouth in ([], [-1], [1.5], "12"):
        with pytest.raises(ValueError, match="lip_vertex_error: argument `mouth_map` expected"):
            fmetrics.lip_vertex_error(mouth_map=mouth)


# ------------------------------------------------------------ distributed: gloo ranks, one of them empty


def _dist_body(rank: int, world: int):
    import torch as _torch

    _torch.set_num_threads(1)
    from tests.cases.multimodal import CASES
    from tests.test_distributed import _run_case

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in CASES:
            out[case.id] = _run_case(case, rank, world, 0)[1:]  # (reduced value, one-process value on rank 0)
    return out


@pytest.mark.slow  # two process groups that each build the network: ~1 minute on a loaded 2-core machine
@pytest.mark.distributed
@pytest.mark.parametrize("world", [2, 3])
def test_gloo_ranks_with_an_empty_rank_reduce_to_the_one_process_value(world):
    from tests._dist import spawn
    from tests.cases.multimodal import CASES

    results = spawn(_dist_body, world, timeout=400)
    for case in CASES:  # float32 networks give batch-dependent roundings: float tolerance, as the law suite
        canonical = case.check.get("canonical", lambda v: v)
        one = canonical(results[0][case.id][1])
        for r in range(world):
            got = canonical(results[r][case.id][0])
            if isinstance(one, dict):
                for k in one:
                    torch.testing.assert_close(got[k], one[k], rtol=1e-6, atol=1e-7, msg=f"{case.id} rank {r} {k}")
            else:
                torch.testing.assert_close(got, one, rtol=1e-6, atol=1e-7, msg=f"{case.id} rank {r}")
