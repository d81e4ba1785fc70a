"""The soak with faults: a cluster (services/run-cluster.sh with KINDRED_ON_SERVER_EXIT=restart) serves the mixed
load (`kindred-load mixed` through the gateway) and the fault test's driver (Tests/Cluster/acknowledged_writes.py:
swipes, matches and messages recorded as acknowledged, a Subscribe stream per member) for a given time, while a
chaos loop kills a server with SIGKILL every few minutes (each server once, in a random order, before any twice)
and PostgreSQL once, each started again by run-cluster.sh. Every 10 s it samples each process's RSS (and its
anonymous and file-backed parts), open descriptors and threads from /proc. At the end: requests served, kills,
errors outside the seconds around each kill, RSS and descriptor growth per hour after warm-up, and the fault test's
check that nothing acknowledged was lost; samples.csv, report.json and a PNG of RSS over time go to --out.

    python3 Tests/Soak/soak.py --minutes 30            # the binaries of KINDRED_BIN_PATH, else the debug build
    Tests/Soak/soak.sh --minutes 30                    # builds first (KINDRED_SOAK_RELEASE=1: release binaries)

Exit status 1 when anything acknowledged was lost, an error happened outside a kill window, or (runs with at least
--growth-span minutes of samples) a server's RSS or descriptors grew more than --growth-limit per hour."""
import argparse
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "Cluster"))

from acknowledged_writes import (BOOTSTRAP_SECRET, Driver, SwipePlan, check_nothing_lost,  # noqa: E402
                                 children_of, kill_postgres, kill_server, members_with_profiles)
from cluster_config import SERVERS  # noqa: E402
from cluster_harness import Cluster, assert_clean_stop, bin_dir  # noqa: E402
from soak_plot import plot_rss  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")
# Limits for a load whose members all come from 127.0.0.1 (as Tests/Benchmarks/mixed-load.sh), and the fault
# test's settings; access logs off (they would measure the disk).
CLUSTER_SETTINGS = dict(
    KINDRED_ON_SERVER_EXIT="restart", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET, KINDRED_LOG_LEVEL="warning",
    KINDRED_CHAT_HEARTBEAT_MS="1000", KINDRED_CHAT_MAX_STREAMS_PER_USER="100",
    KINDRED_GATEWAY_CHAT_STREAMS_PER_USER="100",
    KINDRED_MATCH_SWIPE_RATE="1000000", KINDRED_MATCH_SWIPE_BURST="1000000",
    KINDRED_DISCOVERY_VIEWER_RATE="1000000", KINDRED_DISCOVERY_VIEWER_BURST="1000000",
    KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT="10000",
    **{f"KINDRED_{name.upper()}_ACCESS_LOG": "false" for name in SERVERS})


def settings_from(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30, help="load time (default 30)")
    parser.add_argument("--kill-every", type=float, default=180, help="seconds between server kills (default 180)")
    parser.add_argument("--server-kills", type=int, default=None, help="at most this many server kills")
    parser.add_argument("--postgres-at", type=float, default=0.5,
                        help="when PostgreSQL is killed, as a share of the run (default 0.5; negative: never)")
    parser.add_argument("--window", type=float, default=20,
                        help="seconds after a killed process is back during which errors are expected (default 20)")
    parser.add_argument("--settle", type=int, default=20,
                        help="acknowledged writes of the fault driver after a process is back before the next kill")
    parser.add_argument("--warmup", type=float, default=300,
                        help="seconds of a process's life left out of its growth figures (default 300)")
    parser.add_argument("--sample-every", type=float, default=10, help="seconds between /proc samples")
    parser.add_argument("--growth-limit", type=float, default=10, help="allowed growth per hour, percent")
    parser.add_argument("--growth-span", type=float, default=10,
                        help="minutes of samples after warm-up needed to judge growth (default 10)")
    parser.add_argument("--users", type=int, default=800)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--subscribers", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--mix", default="deck=25,swipe=35,message=20,profile=20",
                        help="kindred-load's weights (swipes leave the mix once its swipe plan is done: "
                             "swipers = users - 2 * pairs, each swipes every other swiper once)")
    parser.add_argument("--members", type=int, default=16, help="members of the fault driver (a multiple of 4)")
    parser.add_argument("--message-pause", type=float, default=1.0,
                        help="seconds between the fault driver's messages in each matched pair")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--out", default=None, help="folder for samples.csv, report.json, rss.png, logs")
    parser.add_argument("--plot", default=None, help="also write the RSS plot here")
    return parser.parse_args(argv)


class Sampler:
    """Every `every` seconds: RSS, open descriptors and threads of each server (by the cluster's pids file) and of
    PostgreSQL (postmaster and backends together; proportional set size, so shared buffers count once; processes
    in place of threads; its descriptors apart: `data_fds` of files in its data directory, which each backend keeps
    open as it touches tables, indexes and WAL, a cache bounded by max_files_per_process, and `fds` of the rest:
    client connections, pipes, logs). Each round is appended to `path` as it is taken, so a run that fails still
    leaves its samples."""

    def __init__(self, cluster, every, path):
        self.cluster, self.every = cluster, every
        # (time, name, pid, rss bytes, descriptors, threads, anonymous bytes, file bytes, data-file descriptors)
        self.samples = []
        self.path = path
        path.write_text("time,name,pid,rss_bytes,fds,threads,anon_bytes,file_bytes,data_fds\n")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self):
        while not self.stop.is_set():
            moment = time.time()
            try:
                pids = self.cluster.pids()
            except (OSError, ValueError):
                pids = {}
            taken = []
            for name, pid in pids.items():
                if name in SERVERS:
                    sample = self.process(pid)
                elif name == "postgres":
                    sample = self.postgres(pid)
                else:
                    continue
                if sample:
                    taken.append((moment, name, pid, *sample))
            self.samples += taken
            with open(self.path, "a") as out:
                out.writelines(",".join(str(v) for v in row) + "\n" for row in taken)
            self.stop.wait(self.every - (time.time() - moment) % self.every)

    @staticmethod
    def process(pid):
        try:
            status = pathlib.Path(f"/proc/{pid}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            rss, anonymous, files = (int(fields[key].split()[0]) * 1024 for key in ("VmRSS", "RssAnon", "RssFile"))
            threads = int(fields["Threads"])
            descriptors = len(os.listdir(f"/proc/{pid}/fd"))
            return rss, descriptors, threads, anonymous, files, 0
        except (OSError, KeyError, ValueError):
            return None

    @staticmethod
    def postgres(postmaster):
        pss = {"Pss": 0, "Pss_Anon": 0, "Pss_File": 0}
        descriptors, data_files, processes = 0, 0, 0
        try:
            data_dir = os.readlink(f"/proc/{postmaster}/cwd") + "/"  # PostgreSQL runs in its data directory
        except OSError:
            return None
        for pid in [postmaster, *children_of(postmaster)]:
            try:
                rollup = pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text()
                fields = dict(line.split(":", 1) for line in rollup.splitlines()[1:] if ":" in line)
                for key in pss:
                    pss[key] += int(fields[key].split()[0]) * 1024
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    except OSError:
                        continue  # closed meanwhile
                    if target.startswith(data_dir):
                        data_files += 1
                    else:
                        descriptors += 1
                processes += 1
            except (OSError, KeyError, ValueError):
                continue
        return (pss["Pss"], descriptors, processes, pss["Pss_Anon"], pss["Pss_File"], data_files) if processes else None


class Chaos:
    """kill -9 of a random server every `kill_every` seconds and of PostgreSQL once, each awaited until it is
    back; `kills` holds (name, killed at, back at) in wall-clock time. A kill waits, beyond its time, until
    `progress()` (the fault driver's acknowledged writes) grew by `settings.settle` since the last process came
    back: on a loaded machine the cluster has served again before the next fault, whatever the clock says."""

    def __init__(self, cluster, settings, duration, progress):
        self.cluster, self.settings, self.duration, self.progress = cluster, settings, duration, progress
        self.baseline = progress()
        self.rng = random.Random(settings.seed)
        self.round = []  # the servers still to kill in this round
        self.kills = []
        self.listening_after = {}  # PostgreSQL kill time -> seconds from its return until chat listened again
        self.failures = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name="chaos", daemon=True)

    def _guarded(self):
        try:
            self._run()
        except Exception as error:  # noqa: BLE001 - reported
            self.failures.append(repr(error))

    def _run(self):
        started = time.monotonic()
        postgres_at = self.settings.postgres_at * self.duration if self.settings.postgres_at >= 0 else None
        next_kill = self.settings.kill_every
        server_kills = 0
        limit = self.settings.server_kills
        # Nothing in the last minute (or last quarter of a short run): the check afterwards wants a settled cluster.
        quiet_from = self.duration - min(60.0, self.duration / 4)
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            if self.progress() - self.baseline < self.settings.settle:
                pass
            elif postgres_at is not None and elapsed >= postgres_at:
                postgres_at = None
                self._kill("postgres", lambda: kill_postgres(self.cluster))
            elif elapsed >= next_kill and (limit is None or server_kills < limit) and elapsed < quiet_from:
                if not self.round:  # every server once, in a random order, before any twice
                    self.round = sorted(n for n in self.cluster.pids() if n in SERVERS)
                    self.rng.shuffle(self.round)
                name = self.round.pop()
                self._kill(name, lambda: kill_server(self.cluster, name))
                server_kills += 1
                next_kill = time.monotonic() - started + self.settings.kill_every
            self.stop.wait(0.5)

    def _kill(self, name, kill):
        killed = time.time()
        print(f"soak: kill -9 {name} at {killed - self.settings.started:.0f} s", flush=True)
        kill()
        back = time.time()
        self.kills.append((name, killed, back))
        self.baseline = self.progress()
        print(f"soak: {name} back after {back - killed:.1f} s", flush=True)
        if name == "postgres":
            listening = self._chat_listening_again()
            self.listening_after[killed] = listening and round(listening - back, 1)
            print(f"soak: chat listening again {self.listening_after[killed]} s after postgres was back", flush=True)

    def _chat_listening_again(self, timeout=60):
        """When chat's LISTEN connection is up again (its `chat_listening` gauge), or None."""
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.cluster.admin_port('chat')}/metrics"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if re.search(r"^chat_listening(\{[^}]*\})? 1(\.0)?$", response.read().decode(), re.M):
                        return time.time()
            except OSError:
                pass
            time.sleep(0.1)
        return None


class MixedLoad:
    """`kindred-load mixed` through the gateway for the run's duration; failed calls and broken streams land in
    its events file with their time."""

    def __init__(self, cluster, settings, seconds, folder):
        self.events_file = folder / "kindred-load.events"
        self.output = []
        command = [str(bin_dir() / "kindred-load"), "mixed", "--gateway", cluster.gateway,
                   "--key-file", str(cluster.data_dir / "auth" / "signing-key.pem"),
                   "--pids-file", str(cluster.run_dir / "pids"), "--events-file", str(self.events_file),
                   "--users", str(settings.users), "--pairs", str(settings.pairs),
                   "--subscribers", str(settings.subscribers), "--concurrency", str(settings.concurrency),
                   "--mix", settings.mix,
                   "--seconds", str(seconds)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.output.append(line)

    def wait_until_loading(self, timeout=600):
        """Until setup is done and the load begins (the events file says so: kindred-load's stdout is a pipe,
        flushed only at its end)."""
        deadline = time.monotonic() + timeout
        while not (self.events_file.exists() and " started" in self.events_file.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("kindred-load did not start its load:\n" + "".join(self.output))
            time.sleep(0.5)

    def events(self):
        """(time, kind, reason) of every failed call and broken stream; progress as (time, acknowledged)."""
        errors, progress = [], []
        for line in self.events_file.read_text().splitlines():
            moment, what, rest = (line.split(" ", 2) + [""])[:3]
            if what == "progress":
                progress.append((float(moment), int(rest)))
            elif what == "started":
                continue
            else:
                kind, _, reason = rest.partition(" ") if what == "error" else ("Subscribe", "", rest)
                errors.append((float(moment), f"mixed {kind}", reason))
        return errors, progress

    def requests_served(self):
        for line in self.output:
            if line.startswith("all calls:"):
                return int(line.split()[2])
        return None


def growth(samples, warmup, span_needed, kills=()):
    """Per process name: the longest-lived incarnation's growth per hour after its first
    `warmup` seconds (least-squares slope, as a share of the mean), or None when it lived less than span_needed
    after warm-up. Of RSS, descriptors and threads, of RSS's two parts: anonymous memory (heaps, stacks: what a
    leak grows) and file-backed pages (the binary's and libraries' code and data, mapped in as paths run for the
    first time), and of PostgreSQL's data-file descriptors (its backends' file cache: reported, not judged).
    Samples taken while a process of that name was being killed and started again (`kills`: name, killed at, back
    at) are left out: PostgreSQL's processes do not all go at once, and a sample halfway says nothing of growth."""
    by_pid = {}
    for moment, name, pid, rss, descriptors, threads, anonymous, files, data_files in samples:
        if any(name == killed_name and killed <= moment <= back for killed_name, killed, back in kills):
            continue
        by_pid.setdefault((name, pid), []).append((moment, rss, descriptors, threads, anonymous, files, data_files))
    result = {}
    for (name, pid), rows in by_pid.items():
        born = rows[0][0]
        kept = [r for r in rows if r[0] >= born + warmup]
        span = kept[-1][0] - kept[0][0] if len(kept) >= 2 else 0
        if span < span_needed or (name in result and result[name]["span_min"] * 60 >= span):
            continue
        figures = {"pid": pid, "span_min": round(span / 60, 1)}
        for column, label in ((1, "rss"), (2, "fds"), (3, "threads"), (4, "anon"), (5, "file"), (6, "data_fds")):
            xs = [r[0] for r in kept]
            ys = [r[column] for r in kept]
            mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
            slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
            figures[f"{label}_first"], figures[f"{label}_last"] = ys[0], ys[-1]
            figures[f"{label}_growth_pct_per_hour"] = round(100 * slope * 3600 / mean_y, 2) if mean_y else 0.0
        result[name] = figures
    return result


def outside_windows(errors, kills, before, after):
    """The errors not within [killed - before, back + after] of any kill."""
    return [e for e in errors if not any(killed - before <= e[0] <= back + after for _, killed, back in kills)]


def run(settings) -> dict:
    """The whole soak; returns the report (and writes it to settings.out)."""
    folder = pathlib.Path(settings.out or f"/tmp/kindred-soak-{int(time.time())}")
    folder.mkdir(parents=True, exist_ok=True)
    duration = settings.minutes * 60
    settings.started = time.time()
    cluster = Cluster(**CLUSTER_SETTINGS)
    sampler = Sampler(cluster, settings.sample_every, folder / "samples.csv")
    chaos, load_started = None, settings.started
    sampler.thread.start()
    load = None
    report = {"binaries": str(bin_dir()), "minutes": settings.minutes, "cores": os.cpu_count(),
              "load average before": open("/proc/loadavg").read().split()[:3]}
    try:
        community, members = members_with_profiles(cluster, settings.members)
        plan = SwipePlan(settings.members)
        driver = Driver(cluster.gateway, members, message_pause=settings.message_pause)
        # The planned swipes spread over the first four fifths of the run.
        swiper = driver.start_load(plan, swipe_pause=0.8 * duration / max(1, len(plan.later)))
        print(f"soak: fault driver running with {settings.members} members after {time.time() - settings.started:.0f} s",
              flush=True)
        load = MixedLoad(cluster, settings, duration, folder)
        load.wait_until_loading()
        load_started = time.time()
        chaos = Chaos(cluster, settings, duration, driver.acknowledged)
        chaos.thread.start()
        print(f"soak: mixed load running for {settings.minutes:g} min after {load_started - settings.started:.0f} s; "
              f"out {folder}", flush=True)
        status = load.process.wait(timeout=duration + 600)
        chaos.stop.set()
        chaos.thread.join(120)
        swiper.join(120)
        driver.stop_load()
        assert status == 0, f"kindred-load exited {status}:\n{''.join(load.output[-30:])}"
        assert not chaos.failures, chaos.failures
        assert not swiper.is_alive(), "the fault driver's swipe plan did not finish"
        found = check_nothing_lost(cluster, driver, community, plan)
    finally:
        sampler.stop.set()
        sampler.thread.join(30)
        if load and load.process.poll() is None:
            load.process.kill()
        (folder / "kindred-load.out").write_text("".join(load.output) if load else "")
        shutil.copytree(cluster.run_dir / "logs", folder / "cluster-logs", dirs_exist_ok=True)
        # Written whatever the outcome: a run stopped by a failure still shows how memory went.
        plot_rss(sampler.samples, chaos.kills if chaos else [], load_started, folder / "rss.png")
        pids = cluster.pids()
        assert_clean_stop(cluster, pids, keep_folder=False)

    mixed_errors, progress = load.events()
    driver_errors = [(moment, f"driver {what}", code) for moment, what, code in driver.transient]
    everything = sorted(mixed_errors + driver_errors)
    # A stream still open when its connection reaches the gateway's maximum age (an hour, ±10 %) is ended with
    # UNAVAILABLE saying so, after a 30 s grace, and reopened on a new connection (chat's resume): not an error.
    recycled = [e for e in everything if "maximum age" in e[2]]
    errors = [e for e in everything if "maximum age" not in e[2]]
    stray = outside_windows(errors, chaos.kills, 1.0, settings.window)
    with open(folder / "errors.txt", "w") as out:  # every error, in or out of a window: seconds after the load began
        for moment, what, reason in everything:
            out.write(f"{moment - load_started:.3f} {what}: {reason}\n")
    loaded = [s for s in sampler.samples if s[0] >= load_started]
    grown = growth(loaded, settings.warmup, settings.growth_span * 60, chaos.kills)
    plot = folder / "rss.png"
    if settings.plot:
        pathlib.Path(settings.plot).write_bytes(plot.read_bytes())
    summary = {}
    for _, what, reason in stray:
        summary[f"{what}: {reason}"] = summary.get(f"{what}: {reason}", 0) + 1
    report.update({
        "load average after": open("/proc/loadavg").read().split()[:3],
        "requests served (kindred-load, measured window)": load.requests_served(),
        "calls acknowledged (kindred-load, warm-up included)": progress[-1][1] if progress else None,
        "driver calls acknowledged": found["swipes acknowledged"] + found["messages acknowledged"],
        "kills": [{"name": n, "at_s": round(k - load_started), "back_after_s": round(b - k, 1),
                   **({"chat_listening_after_back_s": chaos.listening_after.get(k)} if n == "postgres" else {})}
                  for n, k, b in chaos.kills],
        "errors in kill windows": len(errors) - len(stray),
        "streams ended at a connection's maximum age (reopened, not errors)": len(recycled),
        "errors outside kill windows": len(stray),
        "errors outside kill windows by kind": summary,
        "errors outside kill windows, first 20 (s after the load began)": [
            [round(moment - load_started, 1), what, reason] for moment, what, reason in stray[:20]],
        "nothing lost": found,
        "growth after warm-up": grown,
        "kindred-load report": [line.rstrip() for line in load.output if not line.startswith("setup")][-16:],
    })
    (folder / "report.json").write_text(json.dumps(report, indent=2))
    return report


def verdict(report, settings) -> list:
    """What breaks the soak's targets."""
    problems = []
    if report["errors outside kill windows"]:
        problems.append(f"{report['errors outside kill windows']} errors outside kill windows: "
                        f"{report['errors outside kill windows by kind']}")
    for name, figures in report["growth after warm-up"].items():
        for label in ("rss", "fds"):
            if figures[f"{label}_growth_pct_per_hour"] > settings.growth_limit:
                problems.append(f"{name} {label} grew {figures[f'{label}_growth_pct_per_hour']} % per hour")
    return problems


def main():
    settings = settings_from()
    report = run(settings)
    print(json.dumps(report, indent=2))
    problems = verdict(report, settings)
    for problem in problems:
        print(f"soak: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
