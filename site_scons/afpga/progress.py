"""Observable long builds: a line per step with n/total, elapsed time and an ETA from earlier builds.

Each tracked step (codegen, one v++ compile, the link, ...) gets a pre- and a post-action. The
post-action records how long the step took, and a signature of its command and inputs, in
times.json beside the builds. At every step start the still-pending steps are estimated from
that record (a step is pending when its target is missing or its signature changed), and every
step downstream of a pending or running one is pending too; that gives the total and, with their
recorded durations, the ETA. Compile steps run `-j` at a time;
everything else is counted serially.

Reporting must never enter a target's build signature -- editing this file must not re-run an
overnight v++ -- so its actions contribute nothing to it (_Untracked).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass

from SCons.Action import FunctionAction

PARALLEL_KINDS = {"compile"}
# Codegen decides what the other steps see: it is reported on its own, and n/total count the rest,
# estimated once its outputs are on disk.
PREPARATORY_KINDS = {"codegen"}


class _Untracked(FunctionAction):
    """A function action that prints nothing and adds nothing to the build signature."""

    def __init__(self, fn):
        super().__init__(fn, {"strfunction": None})

    def get_presig(self, target, source, env, executor=None):
        return b""


@dataclass
class Step:
    id: str  # stable across builds: the key in times.json
    label: str
    kind: str
    target: str
    outputs: tuple[str, ...]  # every file the step writes (inputs of later steps)
    inputs: tuple[str, ...]
    command: str


def clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Steps:
    def __init__(self, history_path: str, jobs: int):
        self.history_path = history_path
        self.jobs = max(1, jobs)
        self.t0 = time.monotonic()
        self.steps: dict[str, Step] = {}  # by target path
        self.started: dict[str, float] = {}  # step id -> start time (monotonic)
        self.finished: set[str] = set()
        self.lock = threading.Lock()
        self._digests: dict[str, tuple[tuple[int, int], str]] = {}
        try:
            with open(history_path, encoding="utf-8") as f:
                self.history = json.load(f)["steps"]
        except (FileNotFoundError, ValueError, KeyError):
            self.history = {}

    def track(self, env, targets, step_id: str, label: str, kind: str, inputs, command: str = ""):
        """Report on and time the step that builds `targets` (nodes; the first names the step)."""
        outputs = tuple(str(t) for t in targets)
        self.steps[outputs[0]] = Step(step_id, label, kind, outputs[0], outputs, tuple(str(i) for i in inputs),
                                      command)
        env.AddPreAction(targets[0], _Untracked(self._start))
        env.AddPostAction(targets[0], _Untracked(self._finish))

    # --- signatures and estimates ------------------------------------------------------------
    def _digest(self, path: str) -> str:
        try:
            st = os.stat(path)
        except OSError:
            return "missing"
        key = (st.st_mtime_ns, st.st_size)
        cached = self._digests.get(path)
        if cached and cached[0] == key:
            return cached[1]
        with open(path, "rb") as f:
            d = hashlib.sha256(f.read()).hexdigest()
        self._digests[path] = (key, d)
        return d

    def signature(self, s: Step) -> str:
        h = hashlib.sha256(s.command.encode())
        for i in s.inputs:
            h.update(f"\0{i}\0{self._digest(i)}".encode())
        return h.hexdigest()

    def expected(self, s: Step) -> float | None:
        if s.id in self.history:
            return self.history[s.id]["seconds"]
        same = [h["seconds"] for h in self.history.values() if h.get("kind") == s.kind]
        return sum(same) / len(same) if same else None

    def _pending(self) -> list[Step]:
        """Steps not started yet that will run: changed, or downstream of one that runs."""
        running = [s for s in self.steps.values() if s.id in self.started and s.id not in self.finished]
        waiting = [s for s in self.steps.values() if s.id not in self.started]
        pending = [s for s in waiting if not os.path.exists(s.target)
                   or self.history.get(s.id, {}).get("signature") != self.signature(s)]
        produced = {o for s in running + pending for o in s.outputs}
        grew = True
        while grew:
            more = [s for s in waiting if s not in pending and produced.intersection(s.inputs)]
            pending += more
            produced.update(o for s in more for o in s.outputs)
            grew = bool(more)
        return pending

    def _eta(self, now: float, pending: list[Step]) -> str:
        parallel = serial = 0.0
        unknown = 0
        running = [self.steps_by_id[i] for i in self.started if i not in self.finished]
        for s in pending + running:
            if s.kind in PREPARATORY_KINDS:
                continue
            e = self.expected(s)
            if e is None:
                unknown += 1
                continue
            left = max(0.0, e - (now - self.started[s.id])) if s.id in self.started else e
            if s.kind in PARALLEL_KINDS:
                parallel += left
            else:
                serial += left
        if unknown and not parallel and not serial:
            return "ETA unknown (no earlier build to learn from)"
        eta = f"ETA {clock(parallel / self.jobs + serial)}"
        return f"{eta} + {unknown} step(s) never timed" if unknown else eta

    @property
    def steps_by_id(self) -> dict[str, Step]:
        return {s.id: s for s in self.steps.values()}

    # --- the actions ------------------------------------------------------------------------
    def _counted(self, ids) -> int:
        return sum(1 for i in ids if self.steps_by_id[i].kind not in PREPARATORY_KINDS)

    def _start(self, target, source, env):
        s = self.steps[str(target[0])]
        with self.lock:
            now = time.monotonic()
            self.started[s.id] = now
            if s.kind in PREPARATORY_KINDS:
                print(f"[{s.kind}] {s.label}  (elapsed {clock(now - self.t0)})", flush=True)
                return 0
            pending = self._pending()
            n = self._counted(self.started)
            total = n + self._counted(p.id for p in pending)
            e = self.expected(s)
            this = f"~{clock(e)}" if e is not None else "first run"
            print(f"[{n}/{total}] {s.label}  (elapsed {clock(now - self.t0)}, this step {this}, "
                  f"{self._eta(now, pending)})", flush=True)
        return 0

    def _finish(self, target, source, env):
        s = self.steps[str(target[0])]
        with self.lock:
            now = time.monotonic()
            took = now - self.started[s.id]
            self.finished.add(s.id)
            self.history[s.id] = {"seconds": round(took, 3), "signature": self.signature(s), "kind": s.kind,
                                  "label": s.label}
            os.makedirs(os.path.dirname(self.history_path) or ".", exist_ok=True)
            tmp = self.history_path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"steps": self.history}, f, indent=1, sort_keys=True)
            os.replace(tmp, self.history_path)
            if s.kind in PREPARATORY_KINDS:
                print(f"[{s.kind} done] {s.label} in {clock(took)}", flush=True)
            else:
                total = self._counted(self.started) + self._counted(p.id for p in self._pending())
                print(f"[{self._counted(self.finished)}/{total} done] {s.label} in {clock(took)}", flush=True)
        return 0
