"""The soak with faults (Tests/Soak/soak.py) in short, so the script cannot rot: 90 s of the mixed load and the
fault driver through the gateway, one server and PostgreSQL killed with SIGKILL and started again. No error outside
the seconds around each kill, nothing acknowledged lost, every process sampled, the RSS plot written. (Growth per
hour is judged only by the long run, docs/testing.md.)"""
import sys

from cluster_harness import ROOT
from cluster_config import SERVERS

sys.path.insert(0, str(ROOT / "Tests" / "Soak"))
import soak  # noqa: E402


def test_short_soak_loses_nothing_and_fails_only_around_kills(tmp_path):
    settings = soak.settings_from(["--minutes", "1.5", "--kill-every", "25", "--server-kills", "1",
                                   "--postgres-at", "0.55", "--window", "20", "--users", "80", "--pairs", "10",
                                   "--subscribers", "5", "--concurrency", "4", "--members", "12",
                                   "--message-pause", "0.2", "--mix", "deck=25,swipe=10,message=20,profile=20", "--out", str(tmp_path)])
    report = soak.run(settings)
    print(f"\nsoak: {report['requests served (kindred-load, measured window)']} requests, kills {report['kills']}, "
          f"errors in windows {report['errors in kill windows']}, outside {report['errors outside kill windows']}; "
          f"nothing lost: {report['nothing lost']}")
    kills = [kill["name"] for kill in report["kills"]]
    assert len(kills) == 2 and "postgres" in kills and any(name in SERVERS for name in kills), kills
    assert report["errors outside kill windows"] == 0, \
        report["errors outside kill windows, first 20 (s after the load began)"]
    assert report["requests served (kindred-load, measured window)"] > 0
    found = report["nothing lost"]
    assert found["messages acknowledged"] == found["messages found"] > 0
    assert found["swipes acknowledged"] == found["swipes found"] > 0
    sampled = {line.split(",")[1] for line in (tmp_path / "samples.csv").read_text().splitlines()[1:]}
    assert sampled == set(SERVERS) | {"postgres"}, sampled
    assert (tmp_path / "rss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not soak.verdict(report, settings)
