#!/usr/bin/env python3
"""Runs every command the README shows, as written, and fails if one fails.

Commands are the lines of ```sh blocks (backslash continuations joined) and the `$ ` lines of
console transcripts. They run with bash in a scratch directory that holds links to the
repository's build/, data/ and tools/, so the files they write (plans, configs, profiles) do
not land in the checkout. Two parts are not run, on purpose:
  - `tools/setup.sh && ...`: set-up already happened (it built the binaries under test); the
    command after `&&` is run.
  - `ctest ...`: that is the test suite this script is part of.
An interactive `dtplan-gui` (no --screenshot) runs offscreen and passes when it is still up,
with no dtplan-gui error on stderr, after a few seconds.

Usage: readme_commands.py README REPO_ROOT BUILD_DIR [--list]
"""
import os
import re
import subprocess
import sys
import tempfile
import time

GUI_UP_SECONDS = 5  # an interactive window still open after this long has started
COMMAND_LIMIT_S = 600  # no README command takes this long on a 2-core machine


def commands_of(readme_text):
    """The README's commands in order, each one shell line."""
    found = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", readme_text, re.S):
        lines = body.split("\n")
        if lang in ("sh", "bash"):
            joined, current = [], ""
            for line in lines:
                current += line[:-1] + " " if line.endswith("\\") else line
                if not line.endswith("\\"):
                    if current.strip():
                        joined.append(" ".join(current.split()))
                    current = ""
            found += joined
        else:
            found += [l[2:].strip() for l in lines if l.startswith("$ ")]
    return found


def runnable(command):
    """The part of a README command that this test runs; None for the suite itself."""
    parts = [p.strip() for p in command.split("&&")]
    parts = [p for p in parts if p != "tools/setup.sh"]
    if not parts or any(p.startswith("ctest") for p in parts):
        return None
    return " && ".join(parts)


def is_interactive_gui(command):
    return "dtplan-gui" in command and "--screenshot" not in command


def run_one(command, cwd, env):
    """(ok, description) for one command."""
    if is_interactive_gui(command):
        proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=GUI_UP_SECONDS)
            return False, f"the window closed (exit {proc.returncode}): {err.strip()}"
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            # Qt's own notices (platform plugin) may appear; dtplan-gui's errors start so.
            errors = [l for l in err.splitlines() if l.startswith("dtplan-gui")]
            return (not errors), (" | ".join(errors) or f"up after {GUI_UP_SECONDS} s")
    start = time.monotonic()
    try:
        r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=COMMAND_LIMIT_S)
    except subprocess.TimeoutExpired:
        return False, f"still running after {COMMAND_LIMIT_S} s"
    took = time.monotonic() - start
    if r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-5:]
        return False, f"exit {r.returncode} after {took:.1f} s: " + " | ".join(tail)
    return True, f"{took:.1f} s"


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    readme, repo, build = argv[1], os.path.abspath(argv[2]), os.path.abspath(argv[3])
    with open(readme, encoding="utf-8") as f:
        commands = [c for c in (runnable(x) for x in commands_of(f.read())) if c]
    if "--list" in argv:
        print("\n".join(commands))
        return 0
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dtplan-readme-") as work:
        os.symlink(build, os.path.join(work, "build"))
        for name in ("data", "tools"):
            os.symlink(os.path.join(repo, name), os.path.join(work, name))
        for i, command in enumerate(commands, 1):
            ok, what = run_one(command, work, env)
            failed += not ok
            print(f"{'ok' if ok else 'FAILED'} [{i}/{len(commands)}] {command}\n    {what}",
                  flush=True)
    print(f"README commands: {len(commands) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
