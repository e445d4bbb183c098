"""`feature_share`: a collection of feature-network metrics that runs each distinct network once per batch.

The static form of torchmetrics' ``FeatureShare``. Every ``nn.Module``
parameter of the members (found through their recipes, nested wrappers and
`Metric.from_output` included) is replaced by one `SharedNetwork` per module
object: members given the same module (hence the same parameters) share it.
During one update of the collection a shared network remembers its outputs by
the identity of its inputs, so members that hand it the same tensor (FID, KID,
MiFID and IS reading one image batch, ``normalize`` alike) get one forward
pass. Outside that update nothing is remembered: the state, ``merge`` and
value are those of `fmetrics.collection` over the members.
"""
from __future__ import annotations

from typing import Mapping, Optional

import torch

from fmetrics import validation
from fmetrics.collection import collection
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.wrappers.input_transformers import metric_input_transformer
from fmetrics.wrappers.multitask import check_metrics

__all__ = ["feature_share", "SharedNetwork"]


class _Memo:
    """Outputs of the shared networks during one update: ``(network id[, method], inputs, output)``, newest last."""

    def __init__(self, size: int):
        self.size, self.active, self.entries = size, False, []

    def call(self, ident: int, net: torch.nn.Module, args: tuple):
        if not self.active:
            return net(*args)
        for key, inputs, out in self.entries:
            if key == ident and len(inputs) == len(args) and all(a is b for a, b in zip(inputs, args)):
                return out
        out = net(*args)
        self.entries = (self.entries + [(ident, args, out)])[-self.size:]
        return out


class SharedNetwork(torch.nn.Module):
    """``net`` behind the memo of one `feature_share`: the same output for the same input tensors within an update."""

    def __init__(self, net: torch.nn.Module, memo: _Memo, ident: int):
        super().__init__()
        self.net, self.memo, self.ident = net, memo, ident
        self.num_features = getattr(net, "num_features", None)  # FID's state size, as the network declares it

    def forward(self, *args):
        return self.memo.call(self.ident, self.net, args)

    def __getattr__(self, attr: str):
        """The network's other attributes; its methods (CLIP's ``get_image_features``, ...) behind the memo too."""
        try:
            return super().__getattr__(attr)  # parameters, buffers, submodules (``net``)
        except AttributeError:
            net = super().__getattr__("net")
            value = getattr(net, attr)
            if attr.startswith("_") or not callable(value) or isinstance(value, torch.nn.Module):
                return value
            memo, ident = self.__dict__["memo"], (self.__dict__["ident"], attr)
            return lambda *args: memo.call(ident, value, args)


_FEATURES = "fmetrics.image.features"
_SCALED = ("frechet_inception_distance", "kernel_inception_distance", "inception_score",
           "memorization_informed_frechet_inception_distance")  # normalize: float images in [0, 1] times 255


def _times_255(imgs):
    """What those metrics do with ``normalize=True`` before their network (float images scaled, others kept)."""
    if not isinstance(imgs, torch.Tensor):
        raise TypeError(f"expected a tensor of images, got {type(imgs).__name__}")
    return imgs.to(torch.float32) * 255 if imgs.is_floating_point() else imgs


@factory
def feature_share(metrics: Mapping[str, Metric], *, max_cache_size: Optional[int] = None) -> Metric:
    """``{name: value}`` of feature-network metrics, each distinct network run once per batch.

    As torchmetrics' ``FeatureShare``: a `fmetrics.collection` whose members
    given the same ``nn.Module`` object (FID, KID, IS, MiFID, LPIPS, CLIP
    score, or any factory metric with a network argument) share its forward
    passes: within one ``update`` a network called again with the same input
    tensors returns its first output. Members read the update's inputs as in
    a collection (positional, or by name with `Metric.from_output`).

    FID, KID, MiFID and IS members with ``normalize=True`` are rebuilt with
    ``normalize=False`` behind one shared scaling of the images, so they share
    too. A member that transforms its inputs otherwise before its network
    (LPIPS with ``normalize=True``, CLIP score's processor) runs it on its own
    copy. Members without a recipe keep their own networks.

    Args:
      metrics: ``{name: Metric}``, non-empty (positional).
      max_cache_size: outputs remembered per update (default ``None``: one per
        member, so every member's call can be shared); a positive int.

    Inputs:
      ``update(state, *inputs)``: the members' inputs, as `fmetrics.collection`.

    Returns:
      ``{name: value}`` as `fmetrics.collection` (a dict value gives ``name_key`` entries).

    Example::

        >>> net = torch.nn.Flatten()
        >>> fs = feature_share({
        ...     "fid": fmetrics.frechet_inception_distance(feature=net),
        ...     "kid": fmetrics.kernel_inception_distance(feature=net, subsets=2, subset_size=8)})
        >>> g = torch.Generator().manual_seed(0)
        >>> s = fs.update(fs.init(), torch.rand(16, 3, 1, 1, generator=g), True)
        >>> s = fs.update(s, torch.rand(16, 3, 1, 1, generator=g) + 0.5, False)
        >>> v = fs.finalize(s)
        >>> round(float(v["fid"]), 3), round(float(v["kid"][0]), 3)
        (1.047, 4.84)
    """
    name = "feature_share"
    check_metrics(name, metrics, "name")
    if max_cache_size is not None and (isinstance(max_cache_size, bool) or not isinstance(max_cache_size, int)
                                       or max_cache_size < 1):
        raise validation.fail(name, "max_cache_size", "a positive int or None", repr(max_cache_size))
    memo = _Memo(max_cache_size or len(metrics))
    shared: dict = {}  # id(module) -> (module, SharedNetwork): the module kept alive, so ids stay distinct

    def share(x):
        if not isinstance(x, torch.nn.Module):
            return x
        if id(x) not in shared:
            shared[id(x)] = (x, SharedNetwork(x, memo, len(shared)))
        return shared[id(x)][1]

    scaled = _Memo(1)  # the [0, 1] -> [0, 255] images of normalize=True members, made once per update

    def scale(imgs):
        return scaled.call(0, _times_255, (imgs,))

    def rebuild(value):
        """``value`` with its networks shared; an image-feature member with ``normalize=True`` rebuilt with
        ``normalize=False`` behind one shared scaling of the images (so the network sees one tensor)."""
        if isinstance(value, torch.nn.Module):
            return share(value)
        if isinstance(value, Mapping):
            return type(value)((k, rebuild(v)) for k, v in value.items())
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(rebuild(v) for v in value)
        if not isinstance(value, Metric) or value.recipe is None or not value.params:
            return value
        r = value.recipe
        kwargs = {k: rebuild(v) for k, v in r.kwargs}
        if r.module == _FEATURES and r.qualname in _SCALED and kwargs.get("normalize") is True:
            return metric_input_transformer(r.call(**{**kwargs, "normalize": False}), transform_pred=scale)
        return r.call(**kwargs)

    inner = collection({k: rebuild(m) for k, m in metrics.items()})

    def update(state, *inputs, **kwargs):
        memo.active, memo.entries, scaled.active, scaled.entries = True, [], True, []
        try:
            return inner.update(state, *inputs, **kwargs)
        finally:
            memo.active, memo.entries, scaled.active, scaled.entries = False, [], False, []

    return inner.replace(update=update, name=name, recipe=None)
