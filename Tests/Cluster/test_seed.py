"""`services/run-cluster.sh --demo` and `kindred admin seed` on a small population (30 members): the demo cluster
seeds itself once up; the same seed run again finds the same members and creates nobody twice; a seeded member's
deck has cards; the photos are real images (the media URL of a card answers a JPEG that Pillow decodes)."""
import io
import json
import os
import subprocess
import time
import urllib.request

import pytest
from PIL import Image

from cluster_harness import Cluster, assert_clean_stop, bin_dir

SEED = "7"
MEMBERS = 30


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(args=("--demo",), KINDRED_DEMO_SEED=SEED, KINDRED_DEMO_MEMBERS=str(MEMBERS))
    pids = running.pids()
    deadline = time.monotonic() + 240
    while "Demo ready.\n" not in running.lines:
        assert "run-cluster: the demo seed failed" not in running.output(), running.output()
        assert time.monotonic() < deadline, "no 'Demo ready.' within 240 s:\n" + running.output()
        time.sleep(0.5)
    yield running
    assert_clean_stop(running, pids)


def kindred(cluster, config_dir, *args, community=None, stdin=""):
    env = {key: value for key, value in os.environ.items() if not key.startswith("KINDRED_")}
    env.update(KINDRED_GATEWAY=cluster.gateway, KINDRED_CONFIG_DIR=str(config_dir))
    if community:
        env["KINDRED_COMMUNITY"] = community
    result = subprocess.run([str(bin_dir() / "kindred"), *args], env=env, input=stdin, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"kindred {' '.join(args)} -> {result.returncode}\n{result.stdout}{result.stderr}"
    return result.stdout


def demo_accounts(cluster) -> dict:
    rows = cluster.psql(f"SELECT email, id FROM auth.accounts WHERE email LIKE 'demo-{SEED}-%' ORDER BY email")
    return dict(line.split("|") for line in rows.split("\n") if line)


def test_demo_cluster_seeds_members_with_swipes_and_prints_how_to_sign_in(cluster):
    output = cluster.output()
    summary = next(line for line in cluster.lines if line.startswith(f"Seeded {MEMBERS} demo members (seed {SEED})"))
    assert f"{MEMBERS} new accounts" in summary, summary
    new_matches = int(summary.split(" new matches")[0].rsplit(" ", 1)[1])
    new_connections = int(summary.split(" new connections")[0].rsplit(" ", 1)[1])
    assert new_matches + new_connections > 0, summary
    assert f"kindred signin demo-{SEED}-0@example.com" in output
    assert len(demo_accounts(cluster)) == MEMBERS


def test_the_same_seed_again_finds_the_same_members_and_creates_nobody(cluster, tmp_path):
    before = demo_accounts(cluster)
    result = json.loads(kindred(cluster, tmp_path, "admin", "seed", "--seed", SEED, "--members", str(MEMBERS), "--json",
                                "--mail-log", str(cluster.run_dir / "logs" / "smtp-sink.log")))
    assert result["created_accounts"] == 0
    assert result["swipes"] > 0 and result["replayed_swipes"] == result["swipes"]
    assert {member["email"]: member["user_id"] for member in result["members"]} == before
    assert demo_accounts(cluster) == before
    # Every member has their profile once, with their photos and location (the seed completed nothing more).
    profiles = cluster.psql(f"SELECT count(*), count(DISTINCT user_id) FROM profile.profiles "
                            f"WHERE user_id IN ({','.join(repr(i) for i in before.values())})")
    assert profiles == f"{MEMBERS}|{MEMBERS}", profiles


def test_a_seeded_member_sees_a_deck_with_real_photos(cluster, tmp_path):
    password = f"kindred-demo-{SEED}-password"
    # Member 0 is in dating (two photos each); member 3 in fitness (no gender matching: the fullest deck).
    kindred(cluster, tmp_path / "dating", "signin", f"demo-{SEED}-0@example.com", community="dating",
            stdin=password + "\n")
    kindred(cluster, tmp_path / "fitness", "signin", f"demo-{SEED}-3@example.com", community="fitness",
            stdin=password + "\n")
    deck = json.loads(kindred(cluster, tmp_path / "fitness", "deck", "--json"))
    assert deck["cards"], deck
    assert all(card["user_id"] and card["display_name"] and card["distance_km"] >= 1 for card in deck["cards"])
    photos = kindred(cluster, tmp_path / "dating", "photo", "list").strip().split("\n")
    assert len(photos) == 2, photos
    urls = [card["photo_urls"][0] for card in deck["cards"] if card["photo_urls"]] + [photos[0].split()[-1]]
    for url in urls[:3]:
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Type"] == "image/jpeg"
            image = Image.open(io.BytesIO(answer.read()))
            image.load()
            assert image.format == "JPEG" and image.size[0] * 5 == image.size[1] * 4, image.size
