"""The model's own code around its layer stack, for the streamed forward: a skeleton on the meta device whose shell
(embeddings, masks, position embeddings, final norm, pooler) is made real, and whose layers are made real one at a time;
the model's own forward runs with stand-in layers to get each layer's inputs and to apply what follows the last one."""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lodex.encoders.errors import ModelError
from lodex.encoders.layer_weights import TensorSlot, read_tensor

# Layer stacks streamed (config.model_type): BERT family, ModernBERT, LFM2 (conv + attention) and Qwen3.
SUPPORTED = ("bert", "roberta", "xlm-roberta", "modernbert", "lfm2", "qwen3")
LayerCall = Callable[[int, Any, tuple[Any, ...], dict[str, Any]], Any]  # (layer index, hidden states, args, kwargs) -> hidden states


def _stub_class() -> Any:  # an nn.Module subclass, defined once torch is imported
    from torch import nn

    class Stub(nn.Module):  # type: ignore[misc]  # torch is typed Any (pyproject: not analysed)
        """Stands in for layer `index`: hands its inputs to `call`; other attributes (attention_type...) are the real layer's."""

        def __init__(self, real: nn.Module, index: int, call: LayerCall) -> None:
            super().__init__()
            self.__dict__["_real"], self.index, self.call = real, index, call

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.__dict__["_real"], name)

        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            return self.call(self.index, hidden_states, args, kwargs)

    return Stub


class Skeleton:
    """A model built on the meta device from its config: the shell loaded from the weights, the layers left empty."""

    def __init__(self, model_dir: Path, slots: dict[str, TensorSlot]) -> None:
        import torch
        from torch import nn
        from transformers import AutoConfig, AutoModel

        try:
            self.config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the model config in {model_dir}: {str(exc).splitlines()[0]}", "check encoder.model") from exc
        if self.config.model_type not in SUPPORTED:
            raise ModelError(
                f"layer streaming does not support {self.config.model_type} models yet (only {', '.join(SUPPORTED)})",
                "set encoder.stream_layers = false and raise encoder.memory_budget_mb so the model loads whole",
            )
        with torch.device("meta"):
            self.model = AutoModel.from_config(self.config).eval()
        self.parent, self.attr, self.prefix = _layer_list(self.model, int(self.config.num_hidden_layers))
        self.layers: list[nn.Module] = list(getattr(self.parent, self.attr))
        self.stubs: list[nn.Module] = []
        setattr(self.parent, self.attr, nn.ModuleList())  # the shell alone, to make it real
        self.model.to_empty(device="cpu")
        self.keys = _key_names(self.model.base_model_prefix, self.model.state_dict().keys(), slots)
        shell = {name: read_tensor(slots[key]) for name, key in self.keys.items()}
        self.model.load_state_dict(shell, strict=False, assign=True)
        self.shell_bytes = sum(t.numel() * 4 for t in shell.values())
        _restore_buffers(self.model, self.config)
        self.slots = slots

    def layer_slots(self, index: int) -> dict[str, TensorSlot]:
        """Layer `index`'s tensors by their name inside the layer."""
        names = self.layers[index].state_dict().keys()
        keys = _key_names(self.model.base_model_prefix, [f"{self.prefix}.{index}.{n}" for n in names], self.slots)
        return {name[len(f"{self.prefix}.{index}.") :]: self.slots[key] for name, key in keys.items()}

    def real_layer(self, index: int, weights: dict[str, Any]) -> Any:
        """Layer `index` made real with these tensors (a copy of the meta layer: the skeleton stays reusable)."""
        layer = copy.deepcopy(self.layers[index])
        layer.load_state_dict(weights, strict=True, assign=True)
        return layer.eval()

    def forward(self, batch: dict[str, Any], call: LayerCall) -> Any:
        """The model's own forward on one batch with every layer replaced by `call`; its last hidden state (None when
        `call` raised StopForward to end the pass early)."""
        from torch import nn

        stub = _stub_class()
        setattr(self.parent, self.attr, nn.ModuleList([stub(layer, i, call) for i, layer in enumerate(self.layers)]))
        try:
            return self.model(**batch, use_cache=False).last_hidden_state
        except StopForward:
            return None
        finally:
            setattr(self.parent, self.attr, nn.ModuleList())

    def at_layer(self, batch: dict[str, Any], index: int, use: Callable[[Any, tuple[Any, ...], dict[str, Any]], None]) -> None:
        """Run the model's forward up to layer `index` and hand that layer's inputs (hidden states, args, kwargs:
        masks, position embeddings) to `use`; the earlier layers are skipped (their output is not needed)."""

        def call(i: int, hidden: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if i == index:
                use(hidden, args, kwargs)
                raise StopForward
            return hidden

        self.forward(batch, call)

    def after_layers(self, batch: dict[str, Any], hidden: Any) -> Any:
        """What the model does after its last layer (final norm), applied to `hidden`: the last hidden state."""
        last = len(self.layers) - 1
        return self.forward(batch, lambda i, h, args, kwargs: hidden if i == last else h)


class StopForward(Exception):
    """Raised by a stand-in layer to end a forward pass once it has what it needs."""


def _layer_list(model: Any, count: int) -> tuple[Any, str, str]:
    """The module holding the layer stack, its attribute name, and the stack's state-dict prefix."""
    from torch import nn

    for name, module in model.named_modules():
        for attr, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) == count and count > 0:
                return module, attr, f"{name}.{attr}" if name else attr
    raise ModelError(f"cannot find the {count} layers of this {type(model).__name__}", "set encoder.stream_layers = false")


def _key_names(prefix: str, names: Any, slots: dict[str, TensorSlot]) -> dict[str, str]:
    """Model state-dict names -> names in the weight files (saved from a head model they carry its prefix, e.g. 'bert.')."""
    found = {}
    for name in names:
        for key in (name, f"{prefix}.{name}"):
            if key in slots:
                found[name] = key
                break
        else:
            raise ModelError(f"the weights lack {name}", "check encoder.model: the weight files do not match config.json")
    return found


def _restore_buffers(model: Any, config: Any) -> None:
    """Recompute the shell's non-persistent buffers (not in the weight files): rotary frequencies (the rotary module
    built afresh), BERT-family position and token type ids; any other kind is refused rather than left uninitialized."""
    import torch

    for _, module in list(model.named_modules()):
        for name, child in list(module.named_children()):
            if "Rotary" in type(child).__name__:
                setattr(module, name, type(child)(config=config))
    for _, module in model.named_modules():
        for name in list(module._non_persistent_buffers_set):  # noqa: SLF001 - torch keeps this set per module
            buffer = getattr(module, name)
            if "Rotary" in type(module).__name__:
                continue
            if name == "position_ids":
                buffer.copy_(torch.arange(buffer.shape[-1]).expand_as(buffer))
            elif name == "token_type_ids":
                buffer.zero_()
            else:
                raise ModelError(
                    f"layer streaming cannot rebuild the buffer {name} of {type(module).__name__}",
                    "set encoder.stream_layers = false and raise encoder.memory_budget_mb so the model loads whole",
                )
