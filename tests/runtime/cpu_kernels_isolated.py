#!/usr/bin/env python3
"""Each build of the CPU kernels (runtime/exec/src/cpu_kernels_isa.cpp) is compiled for its own
instruction set. A global or weak function it defines outside its renamed Eigen namespace, such
as an inline std:: function the compiler emitted out of line, could be kept by the linker for
every caller: an AVX-512 copy would then fault on a CPU without AVX-512.

This reads each object's symbol table (nm) and passes when every global definition is
  - in the build's own namespace (dtplan_eigen_<isa>), or its kernel table, or
  - data (type information, the personality reference: the same bytes in every build), or
  - code whose disassembly (objdump) uses no instruction beyond the baseline: no VEX or EVEX
    encoded instruction (mnemonics starting with v), no ymm/zmm/mask register, no BMI/LZCNT.

  cpu_kernels_isolated.py ISA=OBJECT [ISA=OBJECT...]
"""
import re
import subprocess
import sys

WIDE = re.compile(r"^\s*[0-9a-f]+:\s+(v\w+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|"
                  r"rorx|sarx|shlx|shrx|lzcnt|tzcnt|movbe)\b|%[yz]mm|%k[0-7]")
SANITIZER = re.compile(r"^_*(asan|odr_asan|sancov|ubsan)")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def definitions(obj):
    """(type, mangled, demangled) of every global or weak definition."""
    raw = run("nm", "--defined-only", obj).splitlines()
    demangled = run("nm", "-C", "--defined-only", obj).splitlines()
    out = []
    for r, d in zip(raw, demangled):
        parts = r.split(maxsplit=2)
        if len(parts) == 3 and (parts[1].isupper() or parts[1] == "u"):
            out.append((parts[1], parts[2], d.split(maxsplit=2)[2].strip()))
    return out


def wide_instructions(obj, mangled):
    listing = run("objdump", "-d", "--no-show-raw-insn", f"--disassemble={mangled}", obj)
    return [line.strip() for line in listing.splitlines() if WIDE.search(line)]


def check(isa, obj):
    defs = definitions(obj)
    problems = []
    if not any(d.endswith(f"dtplan::runtime::kCpuKernels_{isa}") for _, _, d in defs):
        problems.append(f"no dtplan::runtime::kCpuKernels_{isa}")
    shared_code = 0
    for kind, mangled, name in defs:
        if f"dtplan_eigen_{isa}::" in name or name.endswith(f"kCpuKernels_{isa}"):
            continue
        if SANITIZER.match(mangled):
            continue
        if kind not in ("T", "W"):  # data: the same bytes whichever build the linker keeps
            continue
        shared_code += 1
        wide = wide_instructions(obj, mangled)
        if wide:
            problems.append(f"{name} is code another build could share, and uses {wide[0]}")
    return problems, len(defs), shared_code


def main(args):
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for arg in args:
        isa, _, obj = arg.partition("=")
        problems, total, shared = check(isa, obj)
        for p in problems:
            print(f"cpu_kernels_isolated: {isa} ({obj}): {p}", file=sys.stderr)
        failed |= bool(problems)
        print(f"{isa}: {total} global definitions; {shared} shared functions, "
              f"{'none' if not problems else 'some'} beyond the baseline")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
