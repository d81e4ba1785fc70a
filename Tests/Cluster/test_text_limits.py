"""Text limits through the gateway, with Python grpcio against a whole cluster: the four oversized strings an
outside probe got accepted (a one-character bio of 20,000 combining marks, a 10 KB swipe surface, a 200 KB message
body, 200 KB report details) answer INVALID_ARGUMENT naming the field and store nothing; so do a display name with
a bidi override and a bio of bytes that are not UTF-8 (refused by the decoder)."""
import time
import uuid

import grpc
import pytest

from cluster_harness import Cluster, assert_clean_stop
from test_cluster import PASSWORD, TIMEOUT, bearer, sign_up_and_sign_in, sign_up_and_verify, unique
from test_deck import deck_of, member
from test_profile import fields

from kindred.api.v1 import (account_pb2, account_pb2_grpc, admin_pb2, admin_pb2_grpc, chat_pb2,  # noqa: E402
                            chat_pb2_grpc, deck_pb2, deck_pb2_grpc, match_pb2, match_pb2_grpc, profile_pb2,
                            profile_pb2_grpc, types_pb2)
from kindred.common.v1 import common_pb2  # noqa: E402

BOOTSTRAP_SECRET = "text-limits-bootstrap-secret-0123456789abcdef"
TOWER = "a" + "\u0301" * 20_000  # one character, 40,001 bytes
SURFACE = "d" + "\u0301" * 5_120  # one character, 10,241 bytes
HUGE = "a" + "\u0301" * 100_000  # one character, 200,001 bytes


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


def refused(call, field):
    """The call answers INVALID_ARGUMENT with a field violation naming `field`; returns the violation."""
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, f"{error.code()}: {error.details()}"
        trailers = dict(error.trailing_metadata() or ())
        detail = common_pb2.ErrorDetail.FromString(trailers["kindred-error-bin"])
        violations = {violation.field: violation for violation in detail.field_violations}
        assert field in violations, detail
        return violations[field]
    raise AssertionError(f"{field}: the call succeeded")


def test_a_bio_of_combining_marks_is_refused_and_nothing_changes(cluster, channel):
    profiles = profile_pb2_grpc.ProfileServiceStub(channel)
    # CreateProfile with it: refused, and no profile exists afterwards.
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    auth = bearer(sign_up_and_sign_in(cluster, accounts, "fitness", "tl").tokens.access_token)
    tall = fields("Ada")
    tall.bio = TOWER
    violation = refused(lambda: profiles.CreateProfile(profile_pb2.CreateProfileRequest(
        fields=tall, idempotency_key=str(uuid.uuid4())), metadata=auth, timeout=TIMEOUT), "fields.bio")
    assert violation.reason == "TOO_MANY_BYTES" and violation.hint == "0..500 characters, at most 2000 bytes"
    try:
        profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT)
        raise AssertionError("a profile was stored")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()

    # UpdateProfile with it, and with a display name that reverses itself: refused, the profile unchanged.
    profiles.CreateProfile(profile_pb2.CreateProfileRequest(fields=fields("Ada"), idempotency_key=str(uuid.uuid4())),
                           metadata=auth, timeout=TIMEOUT)
    before = profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT).profile
    refused(lambda: profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio=TOWER), update_paths=["bio"]), metadata=auth, timeout=TIMEOUT),
        "fields.bio")
    assert refused(lambda: profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(job_title="\u202eOEC"), update_paths=["job_title"]), metadata=auth,
        timeout=TIMEOUT), "fields.job_title").reason == "FORBIDDEN_CHARACTER"
    after = profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT).profile
    assert after.fields.bio == before.fields.bio == "Hello there" and after.version == before.version

    # NUL is a control character like any other: refused, whichever way the gateway carries it.
    assert refused(lambda: profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio="nul\x00here"), update_paths=["bio"]), metadata=auth, timeout=TIMEOUT),
        "fields.bio").reason == "FORBIDDEN_CHARACTER"
    # CRLF is stored as LF; surrounding white space is trimmed.
    crlf = profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(
        fields=types_pb2.ProfileFields(bio=" one\r\ntwo\r\n"), update_paths=["bio"]), metadata=auth,
        timeout=TIMEOUT).profile
    assert crlf.fields.bio == "one\ntwo"
    profiles.UpdateProfile(profile_pb2.UpdateProfileRequest(fields=types_pb2.ProfileFields(bio="Hello there"),
                                                            update_paths=["bio"]), metadata=auth, timeout=TIMEOUT)

    # A bio of bytes that are not UTF-8: the gateway's decoder refuses the message before any service sees it.
    valid = profile_pb2.UpdateProfileRequest(fields=types_pb2.ProfileFields(bio="XX"), update_paths=["bio"])
    raw = valid.SerializeToString().replace(b"XX", b"\xff\xfe")
    update = channel.unary_unary("/kindred.api.v1.ProfileService/UpdateProfile",
                                 request_serializer=None, response_deserializer=None)
    try:
        update(raw, metadata=auth, timeout=TIMEOUT)
        raise AssertionError("invalid UTF-8 was accepted")
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    mine = profiles.GetMyProfile(profile_pb2.GetMyProfileRequest(), metadata=auth, timeout=TIMEOUT).profile
    assert mine.fields.bio == "Hello there"


@pytest.fixture(scope="module")
def pair(cluster, channel):
    """Ada and Bo in the fitness community (one-way), each in the other's deck."""
    deck = deck_pb2_grpc.DeckServiceStub(channel)
    ada, ada_auth = member(cluster, channel, "Ada", 48.8566, 2.3522)
    bo, bo_auth = member(cluster, channel, "Bo", 48.8800, 2.3900)
    for auth, other in ((ada_auth, bo), (bo_auth, ada)):
        assert other in [card.profile.user_id for card in deck_of(deck, auth).cards]
    return dict(ada=ada, ada_auth=ada_auth, bo=bo, bo_auth=bo_auth)


@pytest.fixture(scope="module")
def thread(channel, pair):
    """Ada follows Bo with a proper swipe; the connection's thread id, once chat has opened it."""
    deck = deck_pb2_grpc.DeckServiceStub(channel)
    chat = chat_pb2_grpc.ChatServiceStub(channel)
    followed = deck.Swipe(deck_pb2.SwipeRequest(target_user_id=pair["bo"], action=common_pb2.SWIPE_ACTION_LIKE,
                                                surface="deck"), metadata=pair["ada_auth"], timeout=TIMEOUT)
    assert followed.outcome == deck_pb2.SWIPE_OUTCOME_CONNECTED  # fitness is a one-way community
    deadline = time.monotonic() + 20
    while True:
        try:
            chat.History(chat_pb2.HistoryRequest(thread_id=followed.match.match_id), metadata=pair["ada_auth"],
                         timeout=TIMEOUT)
            return followed.match.match_id
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() < deadline, error.details()
            time.sleep(0.3)


def test_a_10_kb_surface_is_refused_and_records_no_like(channel, pair):
    deck = deck_pb2_grpc.DeckServiceStub(channel)
    matches = match_pb2_grpc.MatchServiceStub(channel)
    refused(lambda: deck.Swipe(deck_pb2.SwipeRequest(target_user_id=pair["bo"], action=common_pb2.SWIPE_ACTION_LIKE,
                                                     surface=SURFACE), metadata=pair["ada_auth"], timeout=TIMEOUT),
            "surface")
    assert not matches.ListLikesReceived(match_pb2.ListLikesReceivedRequest(), metadata=pair["bo_auth"],
                                         timeout=TIMEOUT).likes
    assert not matches.ListMatches(match_pb2.ListMatchesRequest(), metadata=pair["ada_auth"], timeout=TIMEOUT).matches


def test_a_200_kb_message_is_refused_and_stores_nothing(channel, pair, thread):
    chat = chat_pb2_grpc.ChatServiceStub(channel)
    violation = refused(lambda: chat.SendMessage(chat_pb2.SendMessageRequest(
        thread_id=thread, client_message_id="m1", body=HUGE), metadata=pair["ada_auth"], timeout=TIMEOUT), "body")
    assert violation.reason == "BODY_TOO_MANY_BYTES"
    history = chat.History(chat_pb2.HistoryRequest(thread_id=thread), metadata=pair["bo_auth"], timeout=TIMEOUT)
    assert not history.messages
    # The same client_message_id with a proper body is a new message, not a replay of anything stored.
    sent = chat.SendMessage(chat_pb2.SendMessageRequest(thread_id=thread, client_message_id="m1", body="hi"),
                            metadata=pair["ada_auth"], timeout=TIMEOUT)
    assert not sent.replayed and sent.message.body == "hi"


def test_200_kb_of_report_details_are_refused_and_file_nothing(cluster, channel, pair):
    accounts = account_pb2_grpc.AccountServiceStub(channel)
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    matches = match_pb2_grpc.MatchServiceStub(channel)
    email = f"{unique('mod-')}@example.com"
    sign_up_and_verify(cluster, accounts, "fitness", email, unique("mod_"))
    admin.BootstrapAdmin(admin_pb2.BootstrapAdminRequest(bootstrap_secret=BOOTSTRAP_SECRET, community_id="fitness",
                                                         login=email), timeout=TIMEOUT)
    admin_auth = bearer(accounts.SignIn(account_pb2.SignInRequest(community_id="fitness", login=email,
                                                                  password=PASSWORD),
                                        timeout=TIMEOUT).tokens.access_token)
    refused(lambda: matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=pair["bo"], reason=common_pb2.REPORT_REASON_HARASSMENT, details=HUGE, idempotency_key="r1"),
        metadata=pair["ada_auth"], timeout=TIMEOUT), "details")
    # Message ids are ASCII: 64 characters of combining marks are 20 KB each, 20 of them 400 KB in every list.
    refused(lambda: matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=pair["bo"], reason=common_pb2.REPORT_REASON_HARASSMENT, details="threats",
        message_ids=["m" + "\u0301" * 10_000] * 20, idempotency_key="r1"), metadata=pair["ada_auth"],
        timeout=TIMEOUT), "message_ids")
    listed = admin.ListReports(admin_pb2.ListReportsRequest(reported_user_id=pair["bo"]), metadata=admin_auth,
                               timeout=TIMEOUT)
    assert not listed.reports
    # The same idempotency key with proper details files the first report (stored trimmed, "\r\n" as "\n").
    filed = matches.ReportUser(match_pb2.ReportUserRequest(
        target_user_id=pair["bo"], reason=common_pb2.REPORT_REASON_HARASSMENT, details="threats\r\nand more\r\n",
        idempotency_key="r1"), metadata=pair["ada_auth"], timeout=TIMEOUT)
    listed = admin.ListReports(admin_pb2.ListReportsRequest(reported_user_id=pair["bo"]), metadata=admin_auth,
                               timeout=TIMEOUT)
    assert [report.report_id for report in listed.reports] == [filed.report_id]
    assert listed.reports[0].details == "threats\nand more"
