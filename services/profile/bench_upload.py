#!/usr/bin/env python3
"""Photo upload benchmark: a 12-megapixel JPEG (Pillow, 4000x3000, EXIF orientation and GPS) uploaded through the
gateway of a local cluster (services/run-cluster.sh with the binaries of KINDRED_BIN_PATH), every rendition made
(4 sizes x JPEG and WebP), with 1 and then N concurrent uploaders for a fixed time each. Prints uploads/s, p50/p99
latency and the profile server's peak RSS (VmHWM, reset between runs).

Usage: KINDRED_BIN_PATH=<release bin dir> bench_upload.py [--seconds 20] [--concurrency 1 8]
"""
import argparse
import hashlib
import io
import pathlib
import statistics
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "Cluster"))

import grpc  # noqa: E402
import piexif  # noqa: E402
from PIL import Image  # noqa: E402

from cluster_harness import Cluster  # noqa: E402
from test_cluster import PASSWORD, bearer, sign_up_and_verify, unique  # noqa: E402

from kindred.api.v1 import account_pb2, account_pb2_grpc, profile_pb2, profile_pb2_grpc, types_pb2  # noqa: E402
from kindred.common.v1 import common_pb2  # noqa: E402


def twelve_megapixels() -> bytes:
    base = Image.radial_gradient("L").resize((4000, 3000))
    noise = Image.effect_noise((4000, 3000), 40)
    image = Image.merge("RGB", (base, noise, Image.linear_gradient("L").resize((4000, 3000))))
    exif = piexif.dump({"0th": {piexif.ImageIFD.Orientation: 6}, "GPS": {piexif.GPSIFD.GPSLatitudeRef: b"N"}})
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def messages(data):
    yield profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
        content_type="image/jpeg", total_size_bytes=len(data), sha256=hashlib.sha256(data).digest()))
    for offset in range(0, len(data), 1 << 20):
        yield profile_pb2.UploadPhotoRequest(chunk=data[offset:offset + (1 << 20)])


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak(pid: int):
    pathlib.Path(f"/proc/{pid}/clear_refs").write_text("5")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    options = parser.parse_args()
    data = twelve_megapixels()
    print(f"image: 4000x3000 JPEG, {len(data) / 1e6:.1f} MB")
    cluster = Cluster(KINDRED_PROFILE_UPLOADS_PER_HOUR="10000", KINDRED_PROFILE_PHOTO_WORKERS="2")
    try:
        pid = cluster.pids()["profile"]
        channel = grpc.insecure_channel(cluster.gateway, options=[("grpc.max_send_message_length", 32 << 20)])
        accounts = account_pb2_grpc.AccountServiceStub(channel)
        profiles = profile_pb2_grpc.ProfileServiceStub(channel)
        users = []
        for _ in range(max(options.concurrency)):
            email, username = f"{unique('bench-')}@example.com", unique("bench_")
            sign_up_and_verify(cluster, accounts, "fitness", email, username)
            tokens = accounts.SignIn(account_pb2.SignInRequest(community_id="fitness", login=email, password=PASSWORD),
                                     timeout=30).tokens
            auth = bearer(tokens.access_token)
            profiles.CreateProfile(profile_pb2.CreateProfileRequest(fields=types_pb2.ProfileFields(
                display_name="Bench", birth_date=common_pb2.CalendarDate(year=1990, month=1, day=1))),
                metadata=auth, timeout=30)
            users.append(auth)
        for concurrency in options.concurrency:
            latencies, failures, lock, stop = [], [], threading.Lock(), time.monotonic() + options.seconds
            reset_peak(pid)

            def uploader(auth):
                while time.monotonic() < stop:
                    started = time.monotonic()
                    try:
                        photo = profiles.UploadPhoto(messages(data), metadata=auth, timeout=120).photo
                    except grpc.RpcError as error:
                        with lock:
                            failures.append(error.code())
                        continue
                    elapsed = time.monotonic() - started
                    with lock:
                        latencies.append(elapsed)
                    profiles.DeletePhoto(profile_pb2.DeletePhotoRequest(photo_id=photo.photo_id), metadata=auth,
                                         timeout=30)

            threads = [threading.Thread(target=uploader, args=(users[i],)) for i in range(concurrency)]
            began = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.monotonic() - began
            latencies.sort()
            if not latencies:
                print(f"concurrency {concurrency}: no upload succeeded ({failures[:3]})")
                continue
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(f"concurrency {concurrency}: {len(latencies)} uploads in {wall:.1f} s = {len(latencies) / wall:.1f}/s, "
                  f"p50 {statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
                  f"profile-server peak RSS {peak_rss_mib(pid):.0f} MiB, {len(failures)} failed {sorted(set(map(str, failures)))}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
