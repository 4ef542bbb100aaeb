"""Moving modules to and from "fpga" keeps their Parameters, as on the CPU and CUDA: weights tied
across modules (Hugging Face ties a language model's output layer to its input embedding; T5 ties
one `shared` embedding to the encoder, the decoder and the head) stay one Parameter through
`.to("fpga")`, `.fpga()`, `.cpu()`, `.to(dtype)`, `load_state_dict` and `torch.load(map_location=)`,
and a model trained on fpga gives the CPU's numbers."""
import io

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import aten_fpga

VOCAB, WIDTH = 48, 16


class TiedLM(nn.Module):
    """GPT-2's tie: `lm_head.weight = wte.weight`, two modules holding one Parameter."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.mlp = nn.Linear(WIDTH, WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        return self.lm_head(torch.tanh(self.mlp(self.wte(idx))))


class SharedSeq2Seq(nn.Module):
    """T5's tie: one `shared` embedding referenced by the encoder, the decoder and the head."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(VOCAB, WIDTH)
        self.encoder = nn.ModuleDict({"embed_tokens": self.shared, "proj": nn.Linear(WIDTH, WIDTH)})
        self.decoder = nn.ModuleDict({"embed_tokens": self.shared, "proj": nn.Linear(WIDTH, WIDTH)})
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.shared.weight

    def forward(self, idx):
        memory = self.encoder["proj"](self.encoder["embed_tokens"](idx)).mean(1, keepdim=True)
        return self.lm_head(torch.relu(self.decoder["proj"](self.decoder["embed_tokens"](idx)) + memory))


MODELS = [TiedLM, SharedSeq2Seq]


def ties(model):
    """The model's Parameters as groups of names that hold the same object."""
    groups = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    return sorted(sorted(g) for g in groups.values())


def make(cls, seed=0):
    torch.manual_seed(seed)
    return cls()


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("move", [
    lambda m: m.to("fpga"),
    lambda m: m.fpga(),
    lambda m: m.to("fpga").cpu(),
    lambda m: m.to("fpga").to(torch.float64),
    lambda m: m.to("fpga", torch.float64).to("cpu", torch.float32),
    lambda m: m.to(torch.float64).to("fpga"),
], ids=["to_fpga", "fpga", "there_and_back", "fpga_to_dtype", "fpga_dtype_and_back", "dtype_to_fpga"])
def test_moves_keep_ties(cls, move):
    model = make(cls)
    before = ties(model)
    params = {name: p for name, p in model.named_parameters()}
    assert any(len(g) > 1 for g in before), "the model must tie weights"
    moved = move(model)
    assert moved is model
    assert ties(moved) == before
    # The same Parameter objects, as on the CPU and CUDA: optimizers made before the move still hold them.
    assert all(p is params[name] for name, p in moved.named_parameters())
    assert len(list(moved.parameters())) == len(params)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_moving_keeps_gradients_attached(cls):
    """A gradient moves with its Parameter (`param.grad.data = ...` on the same path)."""
    model = make(cls).to("fpga")
    idx = torch.randint(0, VOCAB, (2, 5)).to("fpga")
    model(idx).sum().backward()
    grads = {name: p.grad.cpu() for name, p in model.named_parameters()}
    model.cpu()
    for name, p in model.named_parameters():
        assert p.device.type == "cpu" and p.grad.device.type == "cpu"
        torch.testing.assert_close(p.grad, grads[name], rtol=0, atol=0)


def train(model, device, steps=4):
    """A few AdamW steps of next-token prediction; the moved model's own Parameters are optimized."""
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, VOCAB, (4, 6), generator=g)
        target = torch.randint(0, VOCAB, (4, 6), generator=g)
        # device-resident inputs: the output of a kernel, not a fresh copy
        idx, target = idx.to(device), target.to(device)
        if device == "fpga":
            idx, target = torch.neg(torch.neg(idx)), torch.neg(torch.neg(target))
        loss = F.cross_entropy(model(idx).flatten(0, 1), target.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return model, torch.stack(losses)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_tied_model_trains_as_on_the_cpu(cls):
    """Untied, the embedding gets only part of its gradient: the second loss is off by percents and
    T5's shared weight would not train at all. Tied, every step matches the CPU to rounding."""
    aten_fpga.reset_stats()
    cpu, cpu_losses = train(make(cls), "cpu")
    fpga, fpga_losses = train(make(cls), "fpga")
    torch.testing.assert_close(fpga_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    assert ties(fpga) == ties(cpu)
    for (name, p), q in zip(fpga.named_parameters(), cpu.parameters()):
        assert p.device.type == "fpga", name
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    stats = aten_fpga.stats()
    assert stats["neg.out"]["fpga"] >= 4, stats  # the inputs came from a kernel


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_state_dict_into_fpga_model_keeps_ties(cls):
    source = make(cls, seed=3)
    buf = io.BytesIO()
    torch.save(source.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, map_location="fpga")
    assert all(t.device.type == "fpga" for t in state.values())
    model = make(cls).to("fpga")
    before = ties(model)
    model.load_state_dict(state)
    assert ties(model) == before
    for (name, p), q in zip(model.named_parameters(), source.parameters()):
        assert p.device.type == "fpga", name
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_whole_module_loaded_onto_fpga_keeps_ties(cls):
    source = make(cls, seed=4)
    buf = io.BytesIO()
    torch.save(source, buf)
    buf.seek(0)
    model = torch.load(buf, map_location="fpga", weights_only=False)
    assert ties(model) == ties(source)
    assert all(p.device.type == "fpga" for p in model.parameters())
    idx = torch.randint(0, VOCAB, (2, 5))
    torch.testing.assert_close(model(torch.neg(torch.neg(idx.to("fpga")))).cpu(), source(idx), rtol=1e-5, atol=1e-6)


def test_incompatible_pairs_stay_incompatible():
    """The answer widens only to dense CPU/fpga pairs: a sparse CPU tensor against a dense fpga one is
    still not shallow-copyable, so `.data =` refuses it as on the CPU."""
    dense = torch.zeros(3, device="fpga")
    assert torch._has_compatible_shallow_copy_type(dense, torch.zeros(3))
    assert torch._has_compatible_shallow_copy_type(torch.zeros(3), dense)
    sparse = torch.zeros(3).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(dense, sparse)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        dense.data = sparse
