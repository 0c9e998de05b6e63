"""A 'training step' through torch-like wrappers (site-packages/torch here is NOT torch). Usage: torch_like.py SITE."""

import sys

import torch.nn.modules.module as module
from torch import _ops
from torch.utils import _contextlib


class Linear(module.Module):
    def forward(self, x):
        return _ops.OpOverload("aten::addmm")(x)


class Attention(module.Module):
    def forward(self, x):
        return x["mask"]


class Net(module.Module):
    def __init__(self, site):
        self.layer = Linear() if site == "a" else Attention()

    def forward(self, x):
        return self.layer(x)


@_contextlib.decorate
def train_step(model, batch):
    return model(batch)


if __name__ == "__main__":
    train_step(Net(sys.argv[1] if len(sys.argv) > 1 else "a"), {})
