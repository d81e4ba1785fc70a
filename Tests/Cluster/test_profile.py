"""The profile service end to end through the gateway, with Python grpcio and independent image tools: sign up,
a profile in each of the four preset communities with their attributes, photos made by Pillow (a JPEG with GPS
tags and orientation 6, a PNG with a text chunk, a WebP) uploaded as streams, renditions fetched with GetPhoto
(not-modified the second time) and checked with Pillow and exifread (no metadata left, sizes, orientation
applied), an update, refused immutable fields, and account deletion: footprint zero, photos gone."""
import hashlib
import io
import time
import urllib.error
import urllib.request
import uuid

import exifread
import grpc
import piexif
import pytest
from PIL import Image, PngImagePlugin

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, expect_code, kindred, sign_up_and_sign_in, unique

from kindred.api.v1 import (account_pb2, account_pb2_grpc, home_pb2, home_pb2_grpc, profile_pb2,  # noqa: E402
                            profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2, community_pb2  # noqa: E402

CHUNK = 256 * 1024


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


def signed_up(cluster, channel, community):
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    return accounts, bearer(sign_up_and_sign_in(cluster, accounts, community, "pr").tokens.access_token)


def jpeg_with_gps_and_orientation6() -> bytes:
    # Stored 1600x1200, red left half; orientation 6 turns it upright as 1200x1600 with red on top.
    image = Image.new("RGB", (1600, 1200), (30, 30, 220))
    image.paste(Image.new("RGB", (800, 1200), (220, 30, 30)), (0, 0))
    exif = piexif.dump({
        "0th": {piexif.ImageIFD.Orientation: 6, piexif.ImageIFD.Make: b"KINDRED-SECRET-CAMERA"},
        "GPS": {piexif.GPSIFD.GPSLatitudeRef: b"N", piexif.GPSIFD.GPSLatitude: ((48, 1), (51, 1), (2964, 100)),
                piexif.GPSIFD.GPSLongitudeRef: b"E", piexif.GPSIFD.GPSLongitude: ((2, 1), (17, 1), (4032, 100))},
    })
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, exif=exif)
    return out.getvalue()


def png_with_text() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "KINDRED-SECRET-TEXT")
    out = io.BytesIO()
    Image.new("RGB", (1200, 1500), (10, 200, 10)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


def webp() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1200, 1500), (200, 200, 10)).save(out, "WEBP", quality=80)
    return out.getvalue()


def upload(profiles, auth, data: bytes, content_type: str, key: str = ""):
    def messages():
        yield profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
            content_type=content_type, total_size_bytes=len(data), sha256=hashlib.sha256(data).digest(),
            position=99, idempotency_key=key))
        for offset in range(0, len(data), CHUNK):
            yield profile_pb2.UploadPhotoRequest(chunk=data[offset:offset + CHUNK])
    return profiles.UploadPhoto(messages(), metadata=auth, timeout=60)


def attribute(key, **value):
    return community_pb2.AttributeValue(key=key, **value)


COMMUNITY_ATTRIBUTES = {
    "dating": [],
    "bizmatch": [attribute("business_field", choice_value="technology"), attribute("company", text_value="Acme"),
                 attribute("years_experience", integer_value=7), attribute("role", choice_value="startup")],
    "playdates": [attribute("dog_name", text_value="Rex"), attribute("breed", text_value="Beagle"),
                  attribute("weight_kg", integer_value=12),
                  attribute("personality", choice_values=community_pb2.AttributeChoiceList(values=["playful"]))],
    "fitness": [attribute("activities", choice_values=community_pb2.AttributeChoiceList(values=["yoga"]))],
}


def fields(name, attributes=()):
    return types_pb2.ProfileFields(
        display_name=name, birth_date=common_pb2.CalendarDate(year=1991, month=3, day=9),
        gender=common_pb2.GENDER_WOMAN, interested_in=[common_pb2.GENDER_MAN], bio="Hello there",
        interests=["Hiking", "hiking", "Jazz"], attributes=list(attributes))


def test_a_profile_in_each_preset_community(cluster, channel):
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    for community, attributes in COMMUNITY_ATTRIBUTES.items():
        _, auth = signed_up(cluster, channel, community)
        shown = profiles.GetCommunity(profile_pb2.GetCommunityRequest(), metadata=auth, timeout=TIMEOUT).community
        assert shown.community_id == community
        created = profiles.CreateProfile(profile_pb2.CreateProfileRequest(
            fields=fields("Ada", attributes), idempotency_key=str(uuid.uuid4())), metadata=auth, timeout=TIMEOUT).profile
        assert {a.key for a in created.fields.attributes} == {a.key for a in attributes}, community
        assert list(created.fields.interests) == ["hiking", "jazz"]


def test_photos_profiles_and_erasure_through_the_gateway(cluster, channel):
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    home = home_pb2_grpc.HomeServiceStub(channel)
    accounts, auth = signed_up(cluster, channel, "dating")
    assert home.GetHome(home_pb2.GetHomeRequest(), metadata=auth, timeout=TIMEOUT).needs_profile
    profiles.CreateProfile(profile_pb2.CreateProfileRequest(fields=fields("Bea")), metadata=auth, timeout=TIMEOUT)

    first = upload(profiles, auth, jpeg_with_gps_and_orientation6(), "image/jpeg", key="first-upload")
    again = upload(profiles, auth, jpeg_with_gps_and_orientation6(), "image/jpeg", key="first-upload")
    assert again.photo.photo_id == first.photo.photo_id and len(again.photos) == 1
    upload(profiles, auth, png_with_text(), "image/png")
    last = upload(profiles, auth, webp(), "image/webp")
    assert len(last.photos) == 3

    sizes = {common_pb2.PHOTO_VARIANT_FULL: (1080, 1350), common_pb2.PHOTO_VARIANT_CARD: (640, 800),
             common_pb2.PHOTO_VARIANT_THUMBNAIL: (320, 400), common_pb2.PHOTO_VARIANT_ICON: (84, 105)}
    for photo in last.photos:
        for variant, size in sizes.items():
            for fmt in ("jpeg", "webp"):
                got = profiles.GetPhoto(profile_pb2.GetPhotoRequest(photo_id=photo.photo_id, variant=variant, format=fmt),
                                        metadata=auth, timeout=TIMEOUT)
                image = Image.open(io.BytesIO(got.data))
                assert image.size == size and image.format == fmt.upper()
                assert not image.info.get("exif") and not image.info.get("xmp") and not image.info.get("icc_profile")
                assert not exifread.process_file(io.BytesIO(got.data), details=False)
                assert b"KINDRED-SECRET" not in got.data
                cached = profiles.GetPhoto(profile_pb2.GetPhotoRequest(
                    photo_id=photo.photo_id, variant=variant, format=fmt, if_none_match=got.etag),
                    metadata=auth, timeout=TIMEOUT)
                assert cached.not_modified and not cached.data
    # The same renditions by signed URL: plain GET without any header, ETag and 304, immutable caching.
    urls = [url for photo in last.photos for url in photo.urls]
    assert len(urls) == 3 * 8
    for link in urls:
        with urllib.request.urlopen(link.url, timeout=TIMEOUT) as answer:
            body = answer.read()
            etag, cache = answer.headers["ETag"], answer.headers["Cache-Control"]
            assert answer.headers["Content-Type"] == f"image/{link.format}"
            assert "Set-Cookie" not in answer.headers
        assert Image.open(io.BytesIO(body)).size == (link.width, link.height)
        assert not exifread.process_file(io.BytesIO(body), details=False) and b"KINDRED-SECRET" not in body
        assert cache.startswith("public, max-age=") and cache.endswith(", immutable")
        try:
            urllib.request.urlopen(urllib.request.Request(link.url, headers={"If-None-Match": etag}), timeout=TIMEOUT)
            raise AssertionError("expected 304")
        except urllib.error.HTTPError as error:
            assert error.code == 304
    tampered = urls[0].url.replace("sig=", "sig=A")
    try:
        urllib.request.urlopen(tampered, timeout=TIMEOUT)
        raise AssertionError("a tampered URL was served")
    except urllib.error.HTTPError as error:
        assert error.code == 403

    # Orientation 6 was applied to the pixels: red on top, blue at the bottom.
    full = profiles.GetPhoto(profile_pb2.GetPhotoRequest(photo_id=first.photo.photo_id,
                                                         variant=common_pb2.PHOTO_VARIANT_FULL),
                             metadata=auth, timeout=TIMEOUT)
    upright = Image.open(io.BytesIO(full.data)).convert("RGB")
    top, bottom = upright.getpixel((540, 100)), upright.getpixel((540, 1250))
    assert top[0] > 150 and top[2] < 100 and bottom[2] > 150 and bottom[0] < 100

    updated = profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio="Updated"), update_paths=["bio"]), metadata=auth, timeout=TIMEOUT).profile
    assert updated.fields.bio == "Updated" and updated.eligible  # dating needs gender, interested_in, 2 photos
    for path in ("display_name", "birth_date"):
        expect_code(grpc.StatusCode.FAILED_PRECONDITION,
                    lambda: profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(update_paths=[path]),
                                                   metadata=auth, timeout=TIMEOUT))
    profiles.UpdateLocation(profile_pb2.UpdateLocationRequest(
        location=common_pb2.GeoPoint(latitude_deg=48.85, longitude_deg=2.35)), metadata=auth, timeout=TIMEOUT)
    mine = profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT).profile
    assert mine.eligible and mine.location_set
    answer = home.GetHome(home_pb2.GetHomeRequest(), metadata=auth, timeout=TIMEOUT)
    assert answer.profile.user_id == mine.user_id and answer.community.community_id == "dating"
    assert "profile" not in answer.unavailable_parts and "community" not in answer.unavailable_parts

    # Delete the account: auth's AccountDeleted erases everything in profile (rows and photo bytes).
    accounts.DeleteAccount(account_pb2.DeleteAccountRequest(current_password=PASSWORD), metadata=auth, timeout=TIMEOUT)
    deadline = time.monotonic() + 30
    while True:
        rows = cluster.psql(
            "SELECT (SELECT count(*) FROM profile.profiles WHERE user_id = '%s') + "
            "(SELECT count(*) FROM profile.photos WHERE user_id = '%s') + "
            "(SELECT count(*) FROM profile.photo_variants v WHERE NOT EXISTS "
            "  (SELECT 1 FROM profile.photos p WHERE p.id = v.photo_id)) + "
            "(SELECT count(*) FROM profile.photo_blobs b WHERE NOT EXISTS "
            "  (SELECT 1 FROM profile.photo_variants v WHERE v.blob_key = b.key))" % (mine.user_id, mine.user_id))
        if rows.strip() == "0":
            break
        assert time.monotonic() < deadline, f"profile still holds data of the deleted account: {rows}"
        time.sleep(0.2)
    for link in urls[:4]:
        try:
            urllib.request.urlopen(link.url, timeout=TIMEOUT)
            raise AssertionError("a deleted account's photo was served")
        except urllib.error.HTTPError as error:
            assert error.code == 404


def test_profile_photos_and_location_with_the_kindred_cli(cluster, tmp_path):
    email, username = f"{unique('pc-')}@example.com", unique("pc_")

    def run(*args, stdin="", status=0):
        result = kindred(cluster, tmp_path / "config", "playdates", *args, stdin=stdin)
        assert result.returncode == status, f"kindred {' '.join(args)} -> {result.returncode}\n{result.stdout}{result.stderr}"
        return result.stdout

    run("signup", "--email", email, "--username", username, stdin=PASSWORD + "\n")
    run("verify", "--email", email, "--code", cluster.verification_code(email))
    run("signin", username, stdin=PASSWORD + "\n")
    assert "attribute dog_name" in run("community", "show")
    created = run("profile", "create", "--name", "Rex's human", "--birth-date", "1990-04-01", "--bio", "Dog person",
                  "--attribute", "dog_name=Rex", "--attribute", "breed=Beagle", "--attribute", "weight_kg=12",
                  "--attribute", "personality=playful,curious", "--interest", "Hiking")
    assert "eligible: no, missing location, photos" in created
    image = tmp_path / "dog.jpg"
    image.write_bytes(jpeg_with_gps_and_orientation6())
    assert "Added photo" in run("photo", "add", str(image))
    assert "1080x1350" in run("photo", "list")
    assert "Location set" in run("location", "set", "48.85", "2.35")
    shown = run("profile", "show")
    assert "eligible: yes" in shown and "dog_name: Rex" in shown and "personality: playful, curious" in shown
    assert "bio: Calmer now" in run("profile", "edit", "--bio", "Calmer now")
    run("profile", "edit", "--attribute", "weight_kg=999", status=1)  # out of the community's range
    photo_id = run("photo", "list").split()[1]
    assert "No photos." in run("photo", "remove", photo_id)


def test_a_multi_megabyte_upload_in_one_mebibyte_chunks(cluster, channel):
    """Chunks of the contract's maximum size (1 MiB): with the runtime's default 1 MiB stream window such a
    stream stalled until the body timeout; profile and gateway open a 4 MiB window."""
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    _, auth = signed_up(cluster, channel, "fitness")
    profiles.CreateProfile(profile_pb2.CreateProfileRequest(fields=fields("Cy")), metadata=auth, timeout=TIMEOUT)
    image = Image.merge("RGB", (Image.effect_noise((2000, 2500), 60), Image.linear_gradient("L").resize((2000, 2500)),
                                Image.effect_noise((2000, 2500), 30)))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=95)
    data = out.getvalue()
    assert len(data) > 3 * CHUNK * 4

    def messages():
        yield profile_pb2.UploadPhotoRequest(header=profile_pb2.PhotoUploadHeader(
            content_type="image/jpeg", total_size_bytes=len(data)))
        for offset in range(0, len(data), 1 << 20):
            yield profile_pb2.UploadPhotoRequest(chunk=data[offset:offset + (1 << 20)])
    uploaded = profiles.UploadPhoto(messages(), metadata=auth, timeout=20)
    assert (uploaded.photo.width, uploaded.photo.height) == (1080, 1350)
