"""A tiny model over fsattn.nn.BLA for the training tests: an embedding, BLA blocks with
residuals and a linear head, trained to predict the previous token (the tokens are
independent and uniform, so only the mixer can)."""

from typing import Callable, List

import torch

from fsattn.nn import BLA


class TinyModel(torch.nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, **bla):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.mix = torch.nn.ModuleList(BLA(dim, **bla) for _ in range(layers))
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tok):
        x = self.emb(tok)
        for mix in self.mix:
            y, _ = mix(x, output_state=False)
            x = x + y
        return self.head(x)


def train_previous_token(model: TinyModel, forward: Callable, *, steps: int, batch: int, seqlen: int, lr: float,
                         device: str = "cpu") -> List[float]:
    """Adam on the previous-token task; `forward` is the model or a compiled form of it.
    Returns the loss of every step."""
    vocab = model.head.out_features
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator(device=device).manual_seed(0)
    losses = []
    for _ in range(steps):
        tok = torch.randint(0, vocab, (batch, seqlen), generator=g, device=device)
        logits = forward(tok)
        loss = torch.nn.functional.cross_entropy(logits[:, 1:].reshape(-1, vocab), tok[:, :-1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
