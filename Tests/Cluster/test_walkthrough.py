"""The README's walkthrough, run exactly as written: Alice and Bob sign up (codes from the mail sink's log), make
profiles with generated photos, see each other in `kindred deck`, like each other, match, and chat live.

The blocks are the README's ```sh blocks preceded by a marker comment:

    <!-- walkthrough terminal=NAME [stdin="..."] [expect="..."] [live turn=N say="..."] -->

Each terminal is a bash of its own (the `export` lines of its earlier blocks carry over), run from a folder whose
`.cluster` is the test cluster's runtime folder, with `kindred` on the PATH and KINDRED_GATEWAY naming the test
cluster (the README's commands use the default gateway address, which the variable overrides). `stdin` is typed
at the block's prompt; `expect` must appear in the output (the block is retried for a while: profiles reach the
deck through events); `live` blocks run side by side, and each types its `say` line in `turn` order, which must
appear in the other terminal's output. A command that fails fails the test."""
import html
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from cluster_harness import ROOT, Cluster, assert_clean_stop, bin_dir

MARKER = re.compile(r"<!-- walkthrough (?P<attributes>[^>]*?) -->\s*\n```sh\n(?P<code>.*?)\n```", re.DOTALL)
ATTRIBUTE = re.compile(r'(\w+)(?:=(?:"([^"]*)"|(\S+)))?')
RETRY_SECONDS = 40


def walkthrough_blocks(text: str) -> list:
    blocks = []
    for match in MARKER.finditer(text):
        attributes = {name: html.unescape(quoted or bare or "true")
                      for name, quoted, bare in ATTRIBUTE.findall(match.group("attributes"))}
        blocks.append(dict(attributes, code=match.group("code")))
    return blocks


BLOCKS = walkthrough_blocks((ROOT / "README.md").read_text())


def test_the_readme_has_the_walkthrough_blocks():
    """The parser finds what the walkthrough needs: a block vanishing from the README (or its marker changing)
    must fail here rather than make the walkthrough test pass on less."""
    assert {block["terminal"] for block in BLOCKS} == {"alice", "bob"}, BLOCKS
    assert len(BLOCKS) >= 8
    assert sum("kindred deck" in block["code"] for block in BLOCKS) == 2
    assert sorted(block.get("turn") for block in BLOCKS if "live" in block) == ["1", "2"]
    assert all("kindred chat" in block["code"] for block in BLOCKS if "live" in block)


@pytest.fixture(scope="module")
def cluster():
    running = Cluster()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


class Terminal:
    """One person's terminal: a folder to run in and the exports made so far."""

    def __init__(self, name: str, folder: pathlib.Path, env: dict):
        self.name = name
        self.folder = folder
        self.env = env
        self.exports = []

    def script(self, code: str) -> str:
        return "set -eo pipefail\n" + "\n".join(self.exports) + "\n" + code + "\n"

    def run(self, block: dict) -> str:
        """Runs a block to its end; with `expect`, again until its output contains it."""
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            stdin = block.get("stdin", "").replace("\\n", "\n")
            result = subprocess.run(["bash", "-c", self.script(block["code"])], cwd=self.folder, env=self.env,
                                    input=stdin + "\n" if stdin else "", capture_output=True, text=True, timeout=120)
            output = result.stdout + result.stderr
            expected = block.get("expect")
            done = result.returncode == 0 and (expected is None or expected in result.stdout)
            if done:
                break
            if expected is None or time.monotonic() > deadline:
                pytest.fail(f"{self.name}'s block failed (exit {result.returncode}; expected {expected!r}):\n"
                            f"{block['code']}\n---\n{output}")
            time.sleep(1)
        self.exports += [line for line in block["code"].split("\n") if line.startswith("export ")]
        return output


class Live:
    """A block that stays open (`kindred chat`): output collected as it comes, lines typed into its stdin."""

    def __init__(self, terminal: Terminal, block: dict):
        self.terminal = terminal
        self.block = block
        self.output = ""
        self.start()

    def start(self):
        self.output = ""
        self.process = subprocess.Popen(["bash", "-c", self.terminal.script(self.block["code"])],
                                        cwd=self.terminal.folder, env=self.terminal.env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.output += line

    def running_after(self, seconds: float) -> bool:
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return True
        self.reader.join(timeout=5)
        return False

    def say(self, text: str):
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def finish(self) -> int:
        self.process.stdin.close()
        status = self.process.wait(timeout=30)
        self.reader.join(timeout=5)
        return status


def wait_for(predicate, seconds: float, message):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(message())
        time.sleep(0.1)


def test_two_people_meet_match_and_chat_exactly_as_the_readme_says(cluster):
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kindred-walkthrough-"))
    (folder / ".cluster").symlink_to(cluster.run_dir)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("KINDRED_") and key not in ("XDG_CONFIG_HOME",)}
    env.update(PATH=f"{bin_dir()}:{env.get('PATH', '/usr/bin:/bin')}", KINDRED_GATEWAY=cluster.gateway,
               HOME=str(folder))
    terminals = {}
    live = []
    try:
        for block in BLOCKS:
            terminal = terminals.setdefault(block["terminal"], Terminal(block["terminal"], folder, env))
            if "live" not in block:
                terminal.run(block)
                continue
            # The chat thread opens on the match event: a chat started before it arrives says "no open thread".
            session = Live(terminal, block)
            deadline = time.monotonic() + RETRY_SECONDS
            while not session.running_after(3):
                assert time.monotonic() < deadline, f"{terminal.name}'s chat did not stay open:\n{session.output}"
                session.start()
            live.append(session)
        time.sleep(3)  # both live streams subscribed (a message sent before that is only in the history)
        for speaker in sorted(live, key=lambda session: int(session.block["turn"])):
            line = speaker.block["say"]
            speaker.say(line)
            for listener in live:
                if listener is not speaker:
                    wait_for(lambda: line in listener.output, 20,
                             lambda: f"{listener.terminal.name} never saw {line!r}:\n{listener.output}")
        for session in live:
            status = session.finish()
            assert status == 0, f"{session.terminal.name}'s chat exited {status}:\n{session.output}"
    finally:
        for session in live:
            if session.process.poll() is None:
                session.process.kill()
        shutil.rmtree(folder, ignore_errors=True)
