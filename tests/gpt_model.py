"""The GPT-style target model of the tests and the benchmark: token and position embeddings, causal
self-attention (F.scaled_dot_product_attention), LayerNorm, a GELU MLP, the output tied to the
token embedding, cross-entropy. Trained with AdamW (foreach, the default on "fpga")."""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, SEQ, BATCH, LAYERS = 256, 64, 4, 32, 8, 2


class Block(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.dropout = dropout

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        x = x + F.dropout(self.proj(y.transpose(1, 2).reshape(b, t, c)), p, self.training)
        return x + F.dropout(self.out(F.gelu(self.fc(self.ln2(x)))), p, self.training)


class GPT(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.blocks = nn.ModuleList(Block(dropout) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH)
        self.dropout = dropout

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = F.dropout(self.tok(idx) + self.pos(pos), self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tok.weight.t()  # the output layer is tied to the token embedding
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def batches(steps, seed=0):
    """`steps` (input, target) batches of next-token prediction over a fixed random text."""
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(0, VOCAB, (BATCH * SEQ * 4 + 1,), generator=g)
    out = []
    for _ in range(steps):
        starts = torch.randint(0, text.numel() - SEQ - 1, (BATCH,), generator=g)
        x = torch.stack([text[s:s + SEQ] for s in starts])
        y = torch.stack([text[s + 1:s + SEQ + 1] for s in starts])
        out.append((x, y))
    return out


def train(device, steps=20, dropout=0.0, seed=0, lr=3e-3, on_step=None):
    """Losses of `steps` AdamW steps of a model initialised from `seed` on the CPU, then moved."""
    torch.manual_seed(seed)
    model = GPT(dropout).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    losses = []
    for i, (x, y) in enumerate(batches(steps, seed)):
        if on_step is not None:
            on_step(i)
        loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
