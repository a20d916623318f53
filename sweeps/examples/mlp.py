"""A real small objective for sweeps: a one-hidden-layer MLP in numpy on two interleaved spirals.

Run as a trial (``python -m sweeps.examples.mlp --lr 0.1 --hidden 32 --l2 1e-4 --activation tanh``) it reports the
validation loss after every epoch (``sweeps.trial.report``: a pruned trial stops there), checkpoints through the job
contract (``scheduler_core.jobkit``: on SIGTERM, a preempted trial saves and exits 0, and resumes from that
checkpoint as the same trial), and reports its final validation loss (``sweeps.trial.finish``).

Run anywhere else it trains once and prints the losses, so the objective can be tried in a notebook first.
Deterministic: the data and the initial weights come from fixed seeds, so a trial resumed from a checkpoint
reaches exactly the loss it would have reached uninterrupted.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler_core import jobkit
from sweeps import trial


def spirals(n: int, *, noise: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spirals in the plane, ``n`` points each: separable, but not by a line."""
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1.0, n)) * 3 * np.pi
    arm = np.stack([t * np.cos(t), t * np.sin(t)], axis=1) / (3 * np.pi)
    x = np.concatenate([arm, -arm]) + rng.normal(0.0, noise / 3, (2 * n, 2))
    y = np.concatenate([np.zeros(n), np.ones(n)])
    order = rng.permutation(2 * n)
    return x[order], y[order]


@dataclass
class Model:
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    @classmethod
    def init(cls, hidden: int, seed: int = 1) -> Model:
        rng = np.random.default_rng(seed)
        return cls(w1=rng.normal(0, 1.0, (2, hidden)), b1=np.zeros(hidden),
                   w2=rng.normal(0, 1.0 / np.sqrt(hidden), (hidden, 1)), b2=np.zeros(1))

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, w1=self.w1, b1=self.b1, w2=self.w2, b2=self.b2)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Model:
        arrays = np.load(io.BytesIO(data))
        return cls(w1=arrays["w1"], b1=arrays["b1"], w2=arrays["w2"], b2=arrays["b2"])


def _act(z: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Activation and its derivative."""
    if kind == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(z.dtype)
    a = np.tanh(z)
    return a, 1.0 - a * a


def loss(model: Model, x: np.ndarray, y: np.ndarray, activation: str) -> float:
    hidden, _ = _act(x @ model.w1 + model.b1, activation)
    logits = (hidden @ model.w2 + model.b2)[:, 0]
    return float(np.mean(np.logaddexp(0.0, logits) - y * logits))


def epoch(model: Model, x: np.ndarray, y: np.ndarray, *, lr: float, l2: float, activation: str,
          batch: int, rng: np.random.Generator) -> None:
    """One pass of mini-batch gradient descent on the logistic loss with an L2 penalty."""
    order = rng.permutation(len(x))
    for start in range(0, len(x), batch):
        idx = order[start:start + batch]
        xb, yb = x[idx], y[idx]
        z = xb @ model.w1 + model.b1
        hidden, dact = _act(z, activation)
        logits = (hidden @ model.w2 + model.b2)[:, 0]
        grad_logits = (1.0 / (1.0 + np.exp(-logits)) - yb)[:, None] / len(idx)
        grad_w2 = hidden.T @ grad_logits + l2 * model.w2
        grad_hidden = grad_logits @ model.w2.T * dact
        grad_w1 = xb.T @ grad_hidden + l2 * model.w1
        model.w2 -= lr * grad_w2
        model.b2 -= lr * grad_logits.sum(axis=0)
        model.w1 -= lr * grad_w1
        model.b1 -= lr * grad_hidden.sum(axis=0)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--l2", type=float, default=1e-4)
    parser.add_argument("--activation", choices=["tanh", "relu"], default="tanh")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--points", type=int, default=300, help="points per spiral arm (train and validation)")
    parser.add_argument("--epoch-seconds", type=float, default=0.0,
                        help="pace each epoch to at least this long (to watch a sweep, or preempt a trial)")
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> float | None:
    """Train (resuming from the newest checkpoint, if any); report each epoch; return the final validation loss,
    or ``None`` if the sweep pruned this trial."""
    x, y = spirals(args.points, seed=0)
    x_val, y_val = spirals(args.points, seed=1)
    checkpoint = jobkit.resume()
    if checkpoint is not None:
        model, first = Model.from_bytes(checkpoint.read("model.npz")), checkpoint.step + 1
        print(f"resumed from epoch {checkpoint.step}", flush=True)
    else:
        model, first = Model.init(args.hidden), 0
    val = loss(model, x_val, y_val, args.activation)
    for step in range(first, args.epochs):
        started = time.monotonic()
        rng = np.random.default_rng(1000 + step)         # per epoch, so a resumed run repeats the same batches
        epoch(model, x, y, lr=args.lr, l2=args.l2, activation=args.activation, batch=args.batch, rng=rng)
        val = loss(model, x_val, y_val, args.activation)
        if not np.isfinite(val):
            raise FloatingPointError(f"the loss diverged at epoch {step} (lr={args.lr} is too large)")
        print(f"epoch {step}: val_loss {val:.5f}", flush=True)
        pause = args.epoch_seconds - (time.monotonic() - started)
        if pause > 0:
            time.sleep(pause)   # paces the epoch: a stand-in for compute, so a sweep can be watched or preempted
        if trial.report(step, val):
            print("pruned: stopping", flush=True)
            return None
        if jobkit.should_checkpoint() or jobkit.should_stop():
            jobkit.save(step, {"model.npz": model.to_bytes()})
        if jobkit.should_stop():
            print(f"stopping at epoch {step}: checkpointed, will resume", flush=True)
            sys.exit(0)
    return val


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    val = train(args)
    if val is None:
        return 0
    if trial.in_trial():
        trial.finish(val)
    print(f"final val_loss {val:.5f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
