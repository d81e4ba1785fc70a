"""Photos and cards leak nothing they should not, with Python grpcio and urllib against a cluster: a replayed upload
key answers the first result before the body is sent (a replay costs no buffer; at profile's own port); through the
gateway, a card's version does not
move with location updates (polling it would tell when a member is active), only with what the viewer sees; signed
photo URLs live minutes, not a day, and the gateway's media port answers 404 at once after the photo's removal and
the owner's deactivation."""
import atexit
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc
import pytest
from PIL import Image

from cluster_harness import ROOT, Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, new_member, sign_up_and_verify, unique

# The profile service's own contract, to call it on its port.
_stubs = tempfile.mkdtemp(prefix="kindred-photo-stubs-")
atexit.register(shutil.rmtree, _stubs, ignore_errors=True)  # generated stubs, removed at exit
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}", f"--python_out={_stubs}",
     f"--grpc_python_out={_stubs}",
     *sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto" / "kindred/profile/v1").glob("*.proto"))],
    check=True,
)
sys.path.insert(0, _stubs)

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, profile_pb2,  # noqa: E402
                            profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2  # noqa: E402
from kindred.profile.v1 import photo_pb2 as service_photo_pb2, profile_pb2_grpc as service_profile_pb2_grpc  # noqa

CHUNK = 256 * 1024
BOOTSTRAP_SECRET = "photo-privacy-bootstrap-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_PROFILE_LOCATION_INTERVAL_MS="1000", KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET)
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


def photo(seed: int, size=(900, 1200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (seed % 256, 80, 160)).save(out, "JPEG", quality=85)
    return out.getvalue()


def header(data: bytes, key: str):
    return profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
        content_type="image/jpeg", total_size_bytes=len(data), sha256=hashlib.sha256(data).digest(), position=99,
        idempotency_key=key))


def upload(profiles, auth, data: bytes, key: str = ""):
    def messages():
        yield header(data, key)
        for offset in range(0, len(data), CHUNK):
            yield profile_pb2.UploadPhotoRequest(chunk=data[offset:offset + CHUNK])
    return profiles.UploadPhoto(messages(), metadata=auth, timeout=60)


def test_a_replayed_upload_key_answers_before_the_body(cluster, channel):
    """At the profile service itself (its own port, the member's token): the replay is answered while its body is
    still held back by the client. Through the gateway the replay gets the same answer; the gateway forwards message
    by message and drops the rest once profile has answered, so it holds at most one chunk."""
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    _, auth = new_member(cluster, channel, "Replay")
    data = photo(1)
    first = upload(profiles, auth, data, key="replayed-key")
    assert upload(profiles, auth, data, key="replayed-key").photo.photo_id == first.photo.photo_id

    released = threading.Event()

    def held_back():
        yield service_photo_pb2.UploadPhotoRequest(header=service_photo_pb2.PhotoUploadHeader(
            content_type="image/jpeg", total_size_bytes=len(data), sha256=hashlib.sha256(data).digest(),
            position=99, idempotency_key="replayed-key"))
        released.wait(20)
        for offset in range(0, len(data), CHUNK):
            yield service_photo_pb2.UploadPhotoRequest(chunk=data[offset:offset + CHUNK])

    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('profile')}") as direct:
        started = time.monotonic()
        again = service_profile_pb2_grpc.ProfileServiceStub(direct).UploadPhoto(held_back(), metadata=auth,
                                                                                 timeout=60)
        elapsed = time.monotonic() - started
        released.set()
    assert again.photo.photo_id == first.photo.photo_id and len(again.photos) == 1
    assert elapsed < 10, f"the replay waited {elapsed:.1f} s for its body"


def locate(profiles, auth, latitude, longitude=2.35):
    """UpdateLocation, waiting out the cluster's 1 s interval."""
    for _ in range(50):
        try:
            return profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(location=common_pb2.GeoPoint(
                latitude_deg=latitude, longitude_deg=longitude)), metadata=auth, timeout=TIMEOUT)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            time.sleep(0.2)
    raise AssertionError("UpdateLocation stayed rate limited")


def test_a_cards_version_does_not_move_with_location_updates(cluster, channel):
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    member_id, member_auth = new_member(cluster, channel, "Active")
    _, viewer_auth = new_member(cluster, channel, "Watcher")
    locate(profiles, viewer_auth, 48.85)
    locate(profiles, member_auth, 48.85)

    def card():
        return profiles.GetProfile(profile_pb2.GetProfileRequest(user_id=member_id), metadata=viewer_auth,
                                   timeout=TIMEOUT).profile

    seen = card().version
    locate(profiles, member_auth, 48.85001)  # a metre north: the same cell
    assert card().version == seen
    locate(profiles, member_auth, 48.87)  # about 2 km north: another shared (precision-6) cell
    assert card().version == seen
    profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(fields=types_pb2.ProfileFields(bio="New bio"),
                                                            update_paths=["bio"]), metadata=member_auth, timeout=TIMEOUT)
    edited = card()
    assert edited.bio == "New bio" and edited.version > seen


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_for_status(url: str, status: int, timeout=10.0) -> float:
    """Seconds until `url` answers `status` (the deactivation reaches profile as an event)."""
    started = time.monotonic()
    while status_of(url) != status:
        assert time.monotonic() - started < timeout, f"{url} still not {status} after {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_photo_urls_are_short_lived_and_end_with_removal_and_deactivation(cluster, channel):
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    admin_api = admin_pb2_grpc.AdminServiceStub(channel)
    member_id, member_auth = new_member(cluster, channel, "Pictured")
    viewer_id, viewer_auth = new_member(cluster, channel, "Viewer")
    # Near each other: a card is shown only to a viewer whose deck could show the member (published positions).
    locate(profiles, viewer_auth, 45.76, 4.84)
    locate(profiles, member_auth, 45.76, 4.84)
    admin_email = f"{unique('admin-')}@example.com"
    sign_up_and_verify(cluster, accounts, "fitness", admin_email, unique("admin_"))
    admin_api.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET, community_id="fitness",
                                                             login=admin_email), timeout=TIMEOUT)
    admin = bearer(accounts.SignIn(account_pb2.SignInRequest(community_id="fitness", login=admin_email,
                                                             password=PASSWORD), timeout=TIMEOUT).tokens.access_token)

    kept = upload(profiles, member_auth, photo(2)).photo
    removed = upload(profiles, member_auth, photo(3)).photo
    card = profiles.GetProfile(profile_pb2.GetProfileRequest(user_id=member_id), metadata=viewer_auth,
                               timeout=TIMEOUT).profile
    links = {shown.photo_id: shown.urls for shown in card.photos}
    assert set(links) == {kept.photo_id, removed.photo_id}
    now = time.time()
    for link in [link for urls in links.values() for link in urls]:
        # The default lifetime: valid 15 to 20 minutes, not a day.
        assert now + 15 * 60 - 5 <= link.expires_unix <= now + 20 * 60 + 5, link.expires_unix - now
    kept_url, removed_url = links[kept.photo_id][0].url, links[removed.photo_id][0].url
    assert status_of(kept_url) == 200 and status_of(removed_url) == 200

    profiles.DeletePhoto(profile_pb2.DeletePhotoRequest(photo_id=removed.photo_id), metadata=member_auth,
                         timeout=TIMEOUT)
    assert status_of(removed_url) == 404, "a removed photo is still served"
    assert status_of(kept_url) == 200

    admin_api.DeactivateAccount(admin_pb2.DeactivateAccountRequest(user_id=member_id, note="test"), metadata=admin,
                                timeout=TIMEOUT)
    delay = wait_for_status(kept_url, 404)
    print(f"deactivation to 404 at the media port: {delay * 1000:.0f} ms")
    admin_api.ReactivateAccount(admin_pb2.ReactivateAccountRequest(user_id=member_id), metadata=admin,
                                timeout=TIMEOUT)
    wait_for_status(kept_url, 200)
    assert viewer_id != member_id
