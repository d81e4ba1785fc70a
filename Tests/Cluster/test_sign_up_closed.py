"""A community closed to sign-ups takes no new members, through the gateway with Python grpcio: after an admin sets
`settings.sign_up_open = false`, SignUp answers FAILED_PRECONDITION SIGN_UP_CLOSED for every address (a new one and
a member's alike, so it tells nothing about which emails have accounts), VerifyEmail of an account still pending
answers the same and leaves it pending, a verified account without a profile signs in but CreateProfile refuses it,
and a member keeps signing in and editing their profile. Reopened, the pending account verifies with the code it
already had and the account without a profile creates one."""
import time
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_verify, unique

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, profile_pb2,  # noqa: E402
                            profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2, community_pb2  # noqa: E402

BOOTSTRAP_SECRET = "sign-up-closed-bootstrap-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster():
    running = Cluster(KINDRED_AUTH_BOOTSTRAP_SECRET=BOOTSTRAP_SECRET)
    pids = running.pids()
    yield running
    assert_clean_stop(running, pids)


@pytest.fixture(scope="module")
def channel(cluster):
    with grpc.insecure_channel(cluster.gateway) as channel:
        yield channel


def reason(error: grpc.RpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == "kindred-error-bin":
            return common_pb2.ErrorDetail.FromString(value).reason
    return ""


def refused(call) -> grpc.RpcError:
    try:
        call()
    except grpc.RpcError as error:
        return error
    raise AssertionError("expected the call to be refused, it succeeded")


def assert_closed(call):
    error = refused(call)
    assert (error.code(), reason(error)) == (grpc.StatusCode.FAILED_PRECONDITION, "SIGN_UP_CLOSED"), \
        f"{error.code()} {reason(error)}: {error.details()}"


def sign_in(accounts, community, email):
    signed = accounts.SignIn(account_pb2.SignInRequest(community_id=community, login=email, password=PASSWORD),
                             timeout=TIMEOUT)
    return bearer(signed.tokens.access_token)


def create_profile(profiles, auth, key=None):
    return profiles.CreateProfile(profile_pb2.CreateProfileRequest(
        fields=types_pb2.ProfileFields(display_name="Newcomer", birth_date=common_pb2.CalendarDate(
            year=1990, month=5, day=1)),
        idempotency_key=key or str(uuid.uuid4())), metadata=auth, timeout=TIMEOUT)


def set_sign_up_open(admin_api, admin, community, open_):
    admin_api.UpdateCommunity(admin_pb2.UpdateCommunityRequest(
        community_id=community, settings=community_pb2.CommunitySettings(sign_up_open=open_),
        update_paths=["settings.sign_up_open"]), metadata=admin, timeout=TIMEOUT)


def wait_until(what, check, timeout=30.0):
    """Auth learns the setting from profile's CommunityUpdated event: milliseconds, but not at once."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.02)
    print(f"{what}: {(time.monotonic() - started) * 1000:.0f} ms")


def test_a_closed_community_takes_no_new_members(cluster, channel):
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    admin_api = admin_pb2_grpc.AdminServiceStub(channel)
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    community = unique("closed-")

    admin_email = f"{unique('admin-')}@example.com"
    sign_up_and_verify(cluster, accounts, community, admin_email, unique("admin_"))
    admin_api.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET,
                                                             community_id=community, login=admin_email),
                             timeout=TIMEOUT)
    admin = sign_in(accounts, community, admin_email)
    # Created without naming sign_up_open: a community is created open.
    created = admin_api.CreateCommunity(admin_pb2.CreateCommunityRequest(
        community_id=community, display_name="Closed", settings=community_pb2.CommunitySettings(
            mode=common_pb2.COMMUNITY_MODE_MUTUAL)), metadata=admin, timeout=TIMEOUT)
    assert created.community.settings.sign_up_open
    admin_api.UpdateCommunity(admin_pb2.UpdateCommunityRequest(
        community_id=community, settings=community_pb2.CommunitySettings(min_photos=0),
        update_paths=["settings.min_photos"]), metadata=admin, timeout=TIMEOUT)

    # Before the closing: a member with a profile, a verified account without one, and a pending account.
    member_email = f"{unique('member-')}@example.com"
    sign_up_and_verify(cluster, accounts, community, member_email, unique("member_"))
    member = sign_in(accounts, community, member_email)
    member_key = str(uuid.uuid4())
    create_profile(profiles, member, member_key)
    verified_email = f"{unique('verified-')}@example.com"
    sign_up_and_verify(cluster, accounts, community, verified_email, unique("verified_"))
    pending_email = f"{unique('pending-')}@example.com"
    accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=pending_email,
                                              username=unique("pending_"), password=PASSWORD), timeout=TIMEOUT)
    pending_code = cluster.verification_code(pending_email)

    set_sign_up_open(admin_api, admin, community, False)

    def sign_up(email):
        return accounts.SignUp(account_pb2.SignUpRequest(community_id=community, email=email,
                                                         username=unique("new_"), password=PASSWORD), timeout=TIMEOUT)

    def closed_for_newcomers():
        try:
            sign_up(f"{unique('probe-')}@example.com")
            return False
        except grpc.RpcError as error:
            return reason(error) == "SIGN_UP_CLOSED"

    wait_until("auth to learn the closing", closed_for_newcomers)
    # The same answer for a new address and a member's: SignUp reveals no account.
    new_error = refused(lambda: sign_up(f"{unique('new-')}@example.com"))
    member_error = refused(lambda: sign_up(member_email))
    assert (new_error.code(), reason(new_error), new_error.details()) == \
        (member_error.code(), reason(member_error), member_error.details())
    assert_closed(lambda: sign_up(f"{unique('new-')}@example.com"))

    # The pending account does not become a member: refused, and still pending.
    verify = account_pb2.VerifyEmailRequest(code=account_pb2.VerificationCode(
        community_id=community, email=pending_email, code=pending_code))
    assert_closed(lambda: accounts.VerifyEmail(verify, timeout=TIMEOUT))
    not_verified = refused(lambda: sign_in(accounts, community, pending_email))
    assert reason(not_verified) == "EMAIL_NOT_VERIFIED"

    # The verified account without a profile signs in, but cannot become a member.
    verified = sign_in(accounts, community, verified_email)
    assert_closed(lambda: create_profile(profiles, verified))

    # The member keeps using the app: signs in, edits, and retrying their own CreateProfile still answers it.
    member = sign_in(accounts, community, member_email)
    profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio="Still here"), update_paths=["bio"]), metadata=member, timeout=TIMEOUT)
    assert create_profile(profiles, member, member_key).profile.fields.display_name == "Newcomer"

    # Reopened: the pending account verifies with the code it had, the account without a profile makes one.
    set_sign_up_open(admin_api, admin, community, True)
    wait_until("auth to learn the reopening", lambda: not closed_for_newcomers())
    assert accounts.VerifyEmail(verify, timeout=TIMEOUT).email == pending_email
    assert create_profile(profiles, verified).profile.fields.display_name == "Newcomer"
