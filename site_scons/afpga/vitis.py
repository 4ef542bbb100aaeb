"""The hardware targets (sw_emu, hw_emu, hw): v++ -c per kernel, v++ -l with the generated
connectivity config into torch.xclbin, emconfigutil for the emulation targets, v++ -p for
embedded platforms. Every command is a plain command line, so `scons -n` prints it exactly and
SCons rebuilds a step exactly when its command or inputs change.
"""
from __future__ import annotations

import json
import os

from SCons.Errors import UserError
from SCons.Script import Action, GetOption

from . import connectivity, hls_interface, resources, xclbin

HLS_INCLUDE = "kernels/hls/include"  # our shared HLS headers (never the emu shims: v++ has the real ones)


def _emulation(target: str) -> bool:
    return target in ("sw_emu", "hw_emu")


def tools(target: str) -> tuple[str, ...]:
    return ("v++", "emconfigutil") if _emulation(target) else ("v++",)


def check_tools(env, cfg) -> None:
    """Stop before anything runs when the Vitis tools are missing, saying what to install/source."""
    missing = [t for t in tools(cfg.target) if not env.WhereIs(t)]
    if not missing:
        return
    v = cfg.platform.vitis
    raise UserError(
        f"target={cfg.target} needs Vitis, but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
        f"not on PATH. Nothing was built.\n"
        f"    Install Vitis {v} with the platform {cfg.platform.name} and XRT, then in this shell:\n"
        f"        source /opt/xilinx/Vitis/{v}/settings64.sh\n"
        f"        source /opt/xilinx/xrt/setup.sh\n"
        f"    `scons -n target={cfg.target} ...` prints every command without running it.")


def paths(cfg) -> dict[str, str]:
    out = cfg.out_dir
    return {"xclbin": f"{out}/torch.xclbin", "linked": f"{out}/link/torch.xclbin", "config": f"{out}/connectivity.cfg",
            "emconfig": f"{out}/emconfig.json", "package": f"{out}/package/sd_card.img"}


def _freq(cfg) -> str:
    return f" --kernel_frequency {cfg.freq}" if cfg.freq else ""


def compile_command(cfg, k) -> str:
    out = cfg.out_dir
    uram = " -DAFPGA_URAM" if resources.has_uram(cfg.platform) else ""  # large arrays in UltraRAM
    return (f"v++ -c -t {cfg.target} --platform {cfg.platform.name} -k {k.name} -I {HLS_INCLUDE}{_freq(cfg)} "
            f"-DAFPGA_GEMM_PE_M={cfg.gemm_pe[0]} -DAFPGA_GEMM_PE_N={cfg.gemm_pe[1]}{uram} "
            f"--temp_dir {out}/tmp/{k.name} --report_dir {out}/reports/{k.name} --log_dir {out}/logs/{k.name} "
            f"-o {out}/xo/{k.name}.xo {k.source}")


def link_command(cfg, xos: list[str]) -> str:
    out, p = cfg.out_dir, paths(cfg)
    return (f"v++ -l -t {cfg.target} --platform {cfg.platform.name}{_freq(cfg)} --config {p['config']} "
            f"--temp_dir {out}/tmp/link --report_dir {out}/reports/link --log_dir {out}/logs/link "
            f"-o {p['linked']} {' '.join(xos)}")


def add_members(target, source, env):
    """torch.xclbin: v++'s linked image with the engines' member table added (a USER_METADATA
    section), so that the host finds each member kernel in its engine."""
    with open(str(source[1]), encoding="utf-8") as f:
        members = f.read()
    try:
        xclbin.add_members(str(source[0]), str(target[0]), members)
    except ValueError as e:
        print(f"scons: {source[0]} (the output of v++ -l): {e}; delete it and build again")
        return 1
    return 0


def package_command(cfg) -> str:
    """Embedded platforms boot from an SD card: the packager puts the xclbin (and, for emulation,
    emconfig.json) beside the Linux image of the Xilinx common image."""
    out, p, c = cfg.out_dir, paths(cfg), cfg.common_image
    extra = f" --package.sd_file {p['emconfig']}" if _emulation(cfg.target) else ""
    return (f"v++ -p -t {cfg.target} --platform {cfg.platform.name} --package.out_dir {out}/package "
            f"--package.rootfs {c}/rootfs.ext4 --package.kernel_image {c}/Image --package.boot_mode sd "
            f"--package.sd_file {p['xclbin']}{extra} {p['xclbin']}")


def write_config(target, source, env):
    """connectivity.cfg from the generated sources' m_axi interfaces (a build-time step: the
    sources exist only after codegen)."""
    from .platforms import PLATFORMS

    params = json.loads(source[-1].read())
    tops = hls_interface.load(str(source[0]), params["kernels"])
    plan = connectivity.plan(tops, params["cus"], PLATFORMS[params["platform"]])
    with open(str(target[0]), "w", encoding="utf-8") as f:
        f.write(connectivity.config_text(plan))
    return 0


def check_fit(target, source, env):
    """The resource estimate against the card (site_scons/afpga/resources.py): the step every
    v++ -c waits for, so an image that cannot fit stops in seconds, before any compile."""
    fit = resources.fit_of(str(source[0]), json.loads(source[-1].read()))
    with open(str(target[0]), "w", encoding="utf-8") as f:
        json.dump(fit.to_json(), f, indent=1, sort_keys=True)
        f.write("\n")
    print(resources.table(fit))
    if not fit.fits:
        print("scons: this image does not fit the card: nothing was compiled. Fix what the table names "
              "(docs/building.md, \"Will it fit?\").")
        return 1
    return 0


def dry_run_estimate(cfg, gen) -> None:
    """`scons -n` runs no step, the codegen included: it prints the estimate from the interface file
    an earlier codegen of this level left, when it has every kernel of the image."""
    try:
        fit = resources.fit_of(gen.interface, resources.params(cfg, gen.kernels))
    except (OSError, KeyError, ValueError):
        print(f"(resource estimate: after the codegen writes {gen.interface} for this selection; run without -n "
              "to see it)")
        return
    print(resources.table(fit))


def build(env, cfg, gen, steps) -> list:
    """Declare the steps; returns the image's nodes (xclbin, plus emconfig.json / the package)."""
    fit = env.Command(f"{cfg.out_dir}/fit.json",
                      [gen.interface, env.Value(json.dumps(resources.params(cfg, gen.kernels), sort_keys=True))],
                      Action(check_fit, "estimate the image's resources -> $TARGET"))
    env.Depends(fit, env.Glob("#site_scons/afpga/*.py"))
    if GetOption("no_exec"):
        dry_run_estimate(cfg, gen)
    xo_env = env.Clone()
    if cfg.cache and not GetOption("no_exec"):
        os.makedirs(os.path.dirname(os.path.abspath(cfg.cache)), exist_ok=True)  # SCons makes only the last level
        xo_env.CacheDir(cfg.cache)  # only .xo files: the expensive, position-independent results
    p = paths(cfg)
    xos = []
    for k in gen.kernels:
        command = compile_command(cfg, k)
        xo = xo_env.Command(f"{cfg.out_dir}/xo/{k.name}.xo", [k.source, *(m.source for m in k.members)], command)
        xo_env.Depends(xo, env.Glob(f"#{HLS_INCLUDE}/*.h"))
        xo_env.Requires(xo, fit)  # order only: the check runs first; its result is no input of the .xo
        steps.track(env, xo, f"opt{cfg.opt}/xo/{k.name}", f"v++ -c {k.name}", "compile", [k.source], command)
        xos.append(str(xo[0]))

    params = env.Value(json.dumps({"cus": {k.name: cfg.engine_cus(k) for k in gen.kernels},
                                   "platform": cfg.platform.name, "kernels": [k.name for k in gen.kernels]},
                                  sort_keys=True))
    config = env.Command(p["config"], [gen.interface, params],
                         Action(write_config, "write $TARGET"))
    env.Depends(config, env.Glob("#site_scons/afpga/*.py"))  # the generator's own code is an input

    command = link_command(cfg, xos)
    linked = env.Command(p["linked"], xos + config, command)
    steps.track(env, linked, f"opt{cfg.opt}/link", f"v++ -l torch.xclbin ({len(xos)} kernels)", "link",
                xos + [p["config"]], command)
    image = env.Command(p["xclbin"], [linked, gen.members],
                        Action(add_members, "add the member table to $TARGET (USER_METADATA)"))
    env.Depends(image, env.Glob("#site_scons/afpga/xclbin.py"))
    image = list(image)

    if _emulation(cfg.target):
        command = f"emconfigutil --platform {cfg.platform.name} --od {cfg.out_dir}"
        emconfig = env.Command(p["emconfig"], [], command)
        steps.track(env, emconfig, f"opt{cfg.opt}/emconfig", "emconfigutil emconfig.json", "emconfig", [], command)
        image += emconfig
    if cfg.platform.embedded:
        command = package_command(cfg)
        package = env.Command(p["package"], image, command)
        steps.track(env, package, f"opt{cfg.opt}/package", "v++ -p sd_card.img", "package", list(map(str, image)),
                    command)
        image += package
    return image


def vitis_reports(cfg, gen) -> dict[str, dict[str, str]]:
    """Where v++ leaves its own reports for each step (listed in our build report)."""
    out, p = cfg.out_dir, paths(cfg)
    rows = {k.name: {"report_dir": f"{out}/reports/{k.name}", "log_dir": f"{out}/logs/{k.name}",
                     "summary": f"{out}/xo/{k.name}.xo.compile_summary"} for k in gen.kernels}
    rows["link"] = {"report_dir": f"{out}/reports/link", "log_dir": f"{out}/logs/link",
                    "summary": f"{p['linked']}.link_summary", "info": f"{p['linked']}.info"}
    return rows
