"""Small models for the tasks. No batch norm or other buffers: every model is a pure function
of its parameters, which `torch.func` needs to train many sites' copies at once."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Sequential):
    """Two 5x5 conv blocks (`width` and 2 x `width` channels, each halving height and width)
    and a linear head. A plain `nn.Sequential`, so grouped training can run k copies at once."""

    def __init__(
        self, channels: int, height: int, width_px: int, num_classes: int, width: int = 8
    ) -> None:
        super().__init__(
            nn.Conv2d(channels, width, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * width * (height // 4) * (width_px // 4), num_classes),
        )


class MLP(nn.Sequential):
    """One hidden ReLU layer over flattened inputs."""

    def __init__(self, inputs: int, hidden: int, num_classes: int) -> None:
        super().__init__(
            nn.Flatten(), nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )


class CharLSTM(nn.Module):
    """Character embedding, one LSTM layer written out step by step (so that `torch.func.vmap`
    can batch it over sites), and a linear head on the last hidden state."""

    def __init__(self, vocabulary: int, embedding: int = 8, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocabulary, embedding)
        self.gates = nn.Linear(embedding + hidden, 4 * hidden)
        self.head = nn.Linear(hidden, vocabulary)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Next-character logits for a batch of index sequences (N, T)."""
        inputs = self.embed(x)
        h = inputs.new_zeros(inputs.shape[0], self.hidden)
        c = torch.zeros_like(h)
        for step in range(inputs.shape[1]):
            i, f, g, o = self.gates(torch.cat([inputs[:, step], h], dim=1)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        logits: torch.Tensor = self.head(h)
        return logits
