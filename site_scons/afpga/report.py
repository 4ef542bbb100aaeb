"""The build report beside the image: report.json (for tools) and report.md (for people) -- the
kernels, level, CUs, bank map, time per step and where v++ left its own reports."""
from __future__ import annotations

import json
import os

from SCons.Script import Action

from codegen.abi import LEVEL_NAMES

from . import connectivity, hls_interface, resources
from .progress import clock


def params(cfg, gen, image: list, history: str, vitis_reports: dict | None) -> str:
    """Everything the report needs that is known when SCons reads the build (a Value node)."""
    return json.dumps({
        "target": cfg.target, "platform": cfg.platform.name, "card": cfg.platform.card,
        "memory": cfg.platform.memory, "opt": cfg.opt, "cus": cfg.cus,
        "kernel_cus": {k.name: cfg.engine_cus(k) for k in gen.kernels},
        "kernels": [{"name": k.name, "category": k.category, "dtype": k.dtype, "source": k.source}
                    for k in gen.kernels],
        "outputs": [str(n) for n in image], "history": history, "vitis_reports": vitis_reports,
        "interface": gen.interface, "level_dir": cfg.level_dir, "fit": resources.params(cfg, gen.kernels),
    }, sort_keys=True)


def build(env, cfg, gen, image: list, history: str, vitis_reports: dict | None) -> list:
    value = env.Value(params(cfg, gen, image, history, vitis_reports))
    nodes = env.Command([f"{cfg.out_dir}/report.json", f"{cfg.out_dir}/report.md"],
                        image + [gen.interface, value], Action(write, "write $TARGETS"))
    env.Depends(nodes, env.Glob("#site_scons/afpga/*.py"))
    return nodes


def write(target, source, env):
    from .platforms import PLATFORMS

    p = json.loads(source[-1].read())
    tops = {t.name: t for t in hls_interface.load(p["interface"], [k["name"] for k in p["kernels"]])}
    plan = connectivity.plan(list(tops.values()), p["kernel_cus"], PLATFORMS[p["platform"]])
    banks = connectivity.bank_map(plan)
    try:
        with open(p["history"], encoding="utf-8") as f:
            history = json.load(f)["steps"]
    except (FileNotFoundError, ValueError, KeyError):
        history = {}
    level = f"{p['level_dir']}/"
    steps = [{"step": h["label"], "seconds": h["seconds"]} for sid, h in sorted(history.items())
             if sid.startswith(level) or "/" not in sid]
    kernels = []
    for k in p["kernels"]:
        top = tops[k["name"]]
        cus = dict(plan.kernels)[top]
        kernels.append({**k, "cus": list(cus), "args": [
            {"name": a.name, "type": a.type, "port": a.port, "width": a.width} for a in top.args]})
    reports = {name: {kind: {"path": path, "exists": os.path.exists(path)} for kind, path in r.items()}
               for name, r in (p["vitis_reports"] or {}).items()}
    doc = {"target": p["target"], "platform": {"name": p["platform"], "card": p["card"], "memory": p["memory"]},
           "opt": p["opt"], "level": LEVEL_NAMES[p["opt"]], "cus_per_kernel": p["cus"], "outputs": p["outputs"],
           "kernels": kernels, "bank_map": banks, "steps": steps,
           "total_seconds": round(sum(s["seconds"] for s in steps), 3), "vitis_reports": reports,
           "resources": resources.fit_of(p["interface"], p["fit"]).to_json()}
    with open(str(target[0]), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(str(target[1]), "w", encoding="utf-8") as f:
        f.write(markdown(doc))
    return 0


def markdown(d: dict) -> str:
    lines = [f"# torch.xclbin: target={d['target']}, opt={d['opt']} ({d['level']})", "",
             f"Platform `{d['platform']['name']}` ({d['platform']['card']}, {d['platform']['memory']}); "
             f"{d['cus_per_kernel']} CU(s) per kernel (each kernel's below).", "", "Outputs: " + ", ".join(f"`{o}`" for o in d["outputs"]),
             "", "## Kernels", "", "| kernel | category | dtype | CUs | arguments |", "|---|---|---|---|---|"]
    for k in d["kernels"]:
        args = ", ".join(f"{a['name']}: {a['type']}" for a in k["args"])
        lines.append(f"| {k['name']} | {k['category']} | {k['dtype']} | {', '.join(k['cus'])} | {args} |")
    lines += resources_markdown(d["resources"])
    lines += ["", "## Bank map", "", "| CU | port -> bank |", "|---|---|"]
    for cu, ports in d["bank_map"].items():
        lines.append(f"| {cu} | {', '.join(f'{a} -> {b}' for a, b in ports.items())} |")
    lines += ["", "## Time per step (last run of each)", "", "| step | time |", "|---|---|"]
    lines += [f"| {s['step']} | {clock(s['seconds'])} |" for s in d["steps"]]
    lines.append(f"| **total** | **{clock(d['total_seconds'])}** |")
    if d["vitis_reports"]:
        lines += ["", "## v++ reports", "", "| step | what | path |", "|---|---|---|"]
        for name, r in d["vitis_reports"].items():
            for kind, x in r.items():
                lines.append(f"| {name} | {kind} | `{x['path']}`{'' if x['exists'] else ' (not written)'} |")
    return "\n".join(lines) + "\n"


def resources_markdown(r: dict) -> list[str]:
    """The estimate against the card (site_scons/afpga/resources.py): totals, then per kernel."""
    budget = {k: v * r["budget"] for k, v in r["left_by_shell"].items()}
    worst = max(r["ports_per_bank"].values())
    lines = ["", f"## Resources (estimate): {'fits' if r['fits'] else '**does not fit**'}", "",
             "| | need | limit | use |", "|---|---|---|---|",
             f"| compute units | {r['cus']:,} | {r['max_cus']} (XRT) | {r['cus'] / r['max_cus']:.0%} |",
             f"| m_axi masters on the busiest bank | {worst:,} | {r['max_ports_per_bank']} (Vitis) | "
             f"{worst / r['max_ports_per_bank']:.0%} |"]
    for k, need in r["total"].items():
        have = budget[k]
        lines.append(f"| {k.upper()} | {need:,} | {have:,.0f} (80% of what the shell leaves) | "
                     f"{need / have:.0%} |" if have else f"| {k.upper()} | {need:,} | 0 | - |")
    lines += [f"- {o['what']}: needs {o['need']:,}, the limit is {o['limit']:,}; {o['fix']}" for o in r["overflows"]]
    lines += ["", "| kernel | CUs | ports | lanes | LUT | FF | DSP | BRAM36 | URAM |", "|---|---|---|---|---|---|---|---|---|"]
    for k in sorted(r["kernels"], key=lambda k: -k["total"]["lut"]):
        t = k["total"]
        lines.append(f"| {k['name']} | {k['cus']} | {k['ports']} | {k['lanes']} | {t['lut']:,} | {t['ff']:,} | "
                     f"{t['dsp']:,} | {t['bram36']:,} | {t['uram']:,} |")
    return lines
