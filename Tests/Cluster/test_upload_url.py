"""Photo uploads by URL, with Python requests and raw sockets against a cluster: CreateUploadUrl through the gateway
returns a signed URL on the media port; a PUT of the bytes there stores the photo through UploadPhoto's pipeline and
answers it as JSON; a retried PUT answers the same photo and stores nothing twice, a different body on a used URL is
409; expired, tampered and re-targeted URLs are 403, bodies over the cap 413 (refused from Content-Length before a
byte is sent, and a chunked body cut at the cap), other methods 405; a CORS preflight from an allowed origin passes;
the photo shows in GetMyProfile and in another member's GetProfile. The profile service itself refuses an upload URL
sent with a member's token (only the gateway may pass one on)."""
import base64
import hashlib
import hmac
import io
import json
import random
import select
import socket
import subprocess
import time
import urllib.parse

import grpc
import pytest
import requests
from PIL import Image

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import TIMEOUT, new_member
from test_photo_privacy import service_photo_pb2, service_profile_pb2_grpc

from kindred.api.v1 import profile_pb2, profile_pb2_grpc  # noqa: E402
from kindred.common.v1 import common_pb2  # noqa: E402

CAP = 15 * 1024 * 1024


@pytest.fixture(scope="module")
def cluster():
    running = Cluster()
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


def photo(seed: int, size=(900, 1200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (seed % 256, 120, 60)).save(out, "JPEG", quality=85)
    return out.getvalue()


def upload_url(channel, auth, position=0):
    return profile_pb2_grpc.ProfileServiceStub(channel).CreateUploadUrl(
        profile_pb2.CreateUploadUrlRequest(position=position), metadata=auth, timeout=TIMEOUT)


def put(url, data, **headers):
    return requests.put(url, data=data, headers={"content-type": "image/jpeg", **headers}, timeout=60)


def my_photos(channel, auth):
    return list(profile_pb2_grpc.ProfileServiceStub(channel).GetMyProfile(
        profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT).profile.photos)


def signed(cluster, path: str, expires: int) -> str:
    """A URL signed with the cluster's media key, as the profile service signs them (to make an expired one)."""
    key = (cluster.data_dir / "secrets" / "media-url").read_text().strip().encode()
    mac = hmac.new(key, f"{path}\n{expires}".encode(), hashlib.sha256).digest()
    sig = base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    return f"{path}?exp={expires}&sig={sig}"


def test_a_photo_uploaded_by_url_is_stored_once_and_shown(cluster, channel):
    owner_id, auth = new_member(cluster, channel, "Uploader")
    _, viewer = new_member(cluster, channel, "Viewer")
    grant = upload_url(channel, auth)
    assert grant.upload_url.startswith("http://127.0.0.1:") and "/upload/v1/" in grant.upload_url
    assert grant.max_size_bytes == CAP and grant.upload_id in grant.upload_url
    assert 500 <= grant.expires_unix - time.time() <= 660, "upload URLs live 10 minutes"

    data = photo(1)
    answer = put(grant.upload_url, data)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    stored = answer.json()
    photo_id = stored["photo"]["photoId"]
    assert [p["photoId"] for p in stored["photos"]] == [photo_id]
    assert stored["photo"]["urls"], "the answer carries the renditions' signed URLs"

    again = put(grant.upload_url, data)
    assert again.status_code == 200 and again.json()["photo"]["photoId"] == photo_id
    assert [p.photo_id for p in my_photos(channel, auth)] == [photo_id], "a retried PUT stores nothing twice"

    other = put(grant.upload_url, photo(2))
    assert other.status_code == 409, other.text
    assert other.json()["code"] == "already_exists"
    assert [p.photo_id for p in my_photos(channel, auth)] == [photo_id]

    for who in (auth, viewer):  # a card is shown to members placed near each other
        profile_pb2_grpc.ProfileServiceStub(channel).UpdateLocation(profile_pb2.UpdateLocationRequest(
            location=common_pb2.GeoPoint(latitude_deg=48.85, longitude_deg=2.35)), metadata=who, timeout=TIMEOUT)
    card = profile_pb2_grpc.ProfileServiceStub(channel).GetProfile(
        profile_pb2.GetProfileRequest(user_id=owner_id), metadata=viewer, timeout=TIMEOUT).profile
    assert [p.photo_id for p in card.photos] == [photo_id], "another member sees the photo on the card"
    rendition = requests.get(stored["photo"]["urls"][0]["url"], timeout=TIMEOUT)
    assert rendition.status_code == 200 and rendition.content[:2] == b"\xff\xd8"


def test_curl_uploads_a_large_photo_with_expect_100_continue(cluster, channel, tmp_path):
    """curl sends `Expect: 100-continue` for bodies over 1 MiB: the port answers 100 once the head is admitted."""
    _, auth = new_member(cluster, channel, "Curl")
    grant = upload_url(channel, auth)
    noisy = Image.frombytes("RGB", (1600, 2000), random.Random(7).randbytes(1600 * 2000 * 3))
    path = tmp_path / "large.jpg"
    noisy.save(path, "JPEG", quality=95)
    assert path.stat().st_size > 1 << 20
    result = subprocess.run(["curl", "-sS", "-v", "--http1.1", "-T", str(path), "-H", "Content-Type: image/jpeg",
                             "-w", "\n%{http_code}", grant.upload_url], capture_output=True, text=True, timeout=120)
    body, status = result.stdout.rsplit("\n", 1)
    assert status == "200", result.stderr[-2000:]
    assert "HTTP/1.1 100 Continue" in result.stderr, "curl waited for a 100 that never came"
    assert [p.photo_id for p in my_photos(channel, auth)] == [json.loads(body)["photo"]["photoId"]]


def test_expired_tampered_and_retargeted_urls_are_refused(cluster, channel):
    owner_id, auth = new_member(cluster, channel, "Owner")
    other_id, other_auth = new_member(cluster, channel, "Other")
    grant = upload_url(channel, auth)
    parts = urllib.parse.urlsplit(grant.upload_url)
    base = f"{parts.scheme}://{parts.netloc}"
    data = photo(3)

    path = parts.path
    expired = put(base + signed(cluster, path, int(time.time()) - 1), data)
    assert expired.status_code == 403 and expired.json()["code"] == "permission_denied"
    tampered_sig = grant.upload_url[:-2] + ("AA" if not grant.upload_url.endswith("AA") else "BB")
    assert put(tampered_sig, data).status_code == 403
    assert put(grant.upload_url.replace(f"/{owner_id}/", f"/{other_id}/"), data).status_code == 403, \
        "the URL binds the member: naming another one breaks the signature"
    assert put(grant.upload_url.replace(f"/{grant.upload_id}/0?", f"/{grant.upload_id}/1?"), data).status_code == 403
    assert put(grant.upload_url.replace("exp=", "exp=1"), data).status_code == 403
    # Another member's token changes nothing: the URL, not a token, says whose photo it is.
    by_other = put(grant.upload_url, data, authorization=other_auth[0][1])
    assert by_other.status_code == 200
    assert my_photos(channel, other_auth) == [] and len(my_photos(channel, auth)) == 1

    # The control of the expiry case: the same path signed the same way with a future expiry is taken.
    fresh = upload_url(channel, other_auth)
    fresh_path = urllib.parse.urlsplit(fresh.upload_url).path
    assert put(base + signed(cluster, fresh_path, int(time.time()) + 60), photo(4)).status_code == 200
    assert len(my_photos(channel, other_auth)) == 1


def raw_request(url: str, head: str, body_chunks=(), read_timeout=20.0):
    """Sends `head`, then body pieces one by one until the answer's head arrives (as a client should); returns
    (status, the rest of the answer, bytes of the body sent)."""
    parts = urllib.parse.urlsplit(url)
    sent = 0
    received = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=read_timeout) as sock:
        sock.sendall(head.encode())
        chunks = iter(body_chunks)
        deadline = time.monotonic() + read_timeout
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0)
            chunk = None if readable else next(chunks, None)
            if chunk is None:
                select.select([sock], [], [], 0.5)
                piece = sock.recv(65536) if select.select([sock], [], [], 0)[0] else b""
                if readable and not piece:
                    break
                received += piece
                continue
            try:
                sock.sendall(chunk)
                sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            piece = sock.recv(65536)
            if not piece:
                break
            received += piece
    status_line, _, rest = received.partition(b"\r\n")
    return int(status_line.split()[1]), rest.decode(errors="replace"), sent


def test_bodies_over_the_cap_are_refused_without_being_read(cluster, channel):
    _, auth = new_member(cluster, channel, "Big")
    grant = upload_url(channel, auth)
    target = grant.upload_url.split("127.0.0.1", 1)[1].split("/", 1)[1]
    host = urllib.parse.urlsplit(grant.upload_url).netloc

    started = time.monotonic()
    status, headers, _ = raw_request(grant.upload_url, f"PUT /{target} HTTP/1.1\r\nHost: {host}\r\n"
                                     f"Content-Type: image/jpeg\r\nContent-Length: {CAP + 1}\r\n\r\n")
    assert status == 413 and time.monotonic() - started < 5, "refused from Content-Length, before any body byte"

    megabyte = b"\xff" * (1 << 20)
    chunk = f"{len(megabyte):x}\r\n".encode() + megabyte + b"\r\n"
    status, _, sent = raw_request(grant.upload_url, f"PUT /{target} HTTP/1.1\r\nHost: {host}\r\n"
                                  f"Content-Type: image/jpeg\r\nTransfer-Encoding: chunked\r\n\r\n",
                                  body_chunks=[chunk] * 64)
    assert status == 413
    assert sent < 40 * (1 << 20), f"the server read {sent} bytes of a chunked body past its 15 MiB cap"
    assert my_photos(channel, auth) == []

    # Exactly the cap is not refused for its size (the image check refuses these bytes instead).
    status, _, _ = raw_request(grant.upload_url, f"PUT /{target} HTTP/1.1\r\nHost: {host}\r\n"
                               f"Content-Type: image/jpeg\r\nContent-Length: {CAP}\r\n\r\n",
                               body_chunks=[b"\x00" * (1 << 20)] * 15, read_timeout=60)
    assert status == 400
    assert my_photos(channel, auth) == []


def test_methods_content_types_and_cors(cluster, channel):
    _, auth = new_member(cluster, channel, "Methods")
    grant = upload_url(channel, auth)
    for method in ("GET", "POST", "DELETE"):
        answer = requests.request(method, grant.upload_url, timeout=TIMEOUT)
        assert answer.status_code == 405, method
        assert answer.headers.get("allow") == "PUT, OPTIONS"
    base = grant.upload_url.split("/upload/")[0]
    assert requests.put(base + "/media/v1/x", data=b"x", timeout=TIMEOUT).status_code == 405

    not_an_image = put(grant.upload_url, b"GIF89a" + b"\x00" * 100, **{"content-type": "image/gif"})
    assert not_an_image.status_code == 400, not_an_image.text
    detail = not_an_image.json()["details"][0]
    assert detail["type"] == "kindred.common.v1.ErrorDetail" and detail["debug"]["reason"] == "INVALID_ARGUMENT"
    assert my_photos(channel, auth) == []

    origin = base  # the web app's origin (run-cluster allows the media port's own)
    preflight = requests.options(grant.upload_url, headers={
        "origin": origin, "access-control-request-method": "PUT", "access-control-request-headers": "content-type"},
        timeout=TIMEOUT)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "PUT" in preflight.headers["access-control-allow-methods"]
    assert "content-type" in preflight.headers["access-control-allow-headers"]
    stranger = requests.options(grant.upload_url, headers={
        "origin": "https://evil.example", "access-control-request-method": "PUT"}, timeout=TIMEOUT)
    assert stranger.status_code == 403 and "access-control-allow-origin" not in stranger.headers
    stored = put(grant.upload_url, photo(5), origin=origin)
    assert stored.status_code == 200 and stored.headers["access-control-allow-origin"] == origin


def test_the_profile_service_takes_an_upload_url_only_from_the_gateway(cluster, channel):
    _, auth = new_member(cluster, channel, "Direct")
    grant = upload_url(channel, auth)
    target = "/upload/" + grant.upload_url.split("/upload/", 1)[1]
    data = photo(6)

    def messages():
        yield service_photo_pb2.UploadPhotoRequest(header=service_photo_pb2.PhotoUploadHeader(
            content_type="image/jpeg", total_size_bytes=len(data), upload_url=target))
        yield service_photo_pb2.UploadPhotoRequest(chunk=data)

    with grpc.insecure_channel(f"127.0.0.1:{cluster.port('profile')}") as direct:
        with pytest.raises(grpc.RpcError) as refused:
            service_profile_pb2_grpc.ProfileServiceStub(direct).UploadPhoto(messages(), metadata=auth, timeout=60)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert my_photos(channel, auth) == []
