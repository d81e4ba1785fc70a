"""Python grpcio as an independent client of the auth service: sign-up → verify (link from the delivered mail)
→ sign-in → refresh → reuse detection → sign-out. Exits 0 and prints "FLOW OK" when every step behaved.

Usage: auth_flow.py ADDRESS MAIL_DIR EMAIL USERNAME COMMUNITY
"""

import atexit
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import grpc

address, mail_dir, email, username, community = sys.argv[1:6]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
stubs = tempfile.mkdtemp(prefix="kindred-auth-stubs-")
atexit.register(shutil.rmtree, stubs, ignore_errors=True)  # generated stubs, removed at exit
protos = [os.path.relpath(p, f"{root}/proto") for p in glob.glob(f"{root}/proto/kindred/auth/v1/*.proto")]
protos += [os.path.relpath(p, f"{root}/proto") for p in glob.glob(f"{root}/proto/kindred/common/v1/*.proto")]
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}/proto", f"--python_out={stubs}",
                f"--grpc_python_out={stubs}", *protos], check=True)
sys.path.insert(0, stubs)

from kindred.auth.v1 import account_pb2, auth_pb2_grpc, credentials_pb2  # noqa: E402


def find(module_names, name):
    for module in module_names:
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(name)


messages = [credentials_pb2, account_pb2]
password = "correct horse battery"


def expect_code(code, call):
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
        return
    raise AssertionError(f"expected {code}, the call succeeded")


def wait_for_mail():
    for _ in range(600):
        for path in sorted(glob.glob(f"{mail_dir}/message-*")):
            with open(path) as handle:
                mail = json.load(handle)
            if email in mail.get("rcpt_tos", []):
                return mail["parsed"]["text"]
        time.sleep(0.05)
    raise AssertionError("no verification mail arrived")


with grpc.insecure_channel(address) as channel:
    auth = auth_pb2_grpc.AuthServiceStub(channel)
    auth.SignUp(find(messages, "SignUpRequest")(community_id=community, email=email, username=username,
                                                 password=password), timeout=30)
    token = re.search(r"token=([A-Za-z0-9_-]+)", wait_for_mail()).group(1)
    auth.VerifyEmail(find(messages, "VerifyEmailRequest")(token=token), timeout=30)

    signed_in = auth.SignIn(find(messages, "SignInRequest")(community_id=community, login=email,
                                                            password=password), timeout=30)
    first = signed_in.tokens
    assert first.access_token.count(".") == 2 and first.refresh_token and first.token_type == "Bearer"

    rotated = auth.Refresh(find(messages, "RefreshRequest")(refresh_token=first.refresh_token), timeout=30).tokens
    assert rotated.refresh_token != first.refresh_token and rotated.session_id == first.session_id

    # Presenting the spent token again is reuse: the whole session family is revoked.
    expect_code(grpc.StatusCode.UNAUTHENTICATED,
                lambda: auth.Refresh(find(messages, "RefreshRequest")(refresh_token=first.refresh_token), timeout=30))
    expect_code(grpc.StatusCode.UNAUTHENTICATED,
                lambda: auth.Refresh(find(messages, "RefreshRequest")(refresh_token=rotated.refresh_token), timeout=30))

    # A new session signs out; its refresh token is dead afterwards.
    again = auth.SignIn(find(messages, "SignInRequest")(community_id=community, login=username,
                                                        password=password), timeout=30).tokens
    auth.SignOut(find(messages, "SignOutRequest")(), timeout=30,
                 metadata=[("authorization", f"Bearer {again.access_token}")])
    expect_code(grpc.StatusCode.UNAUTHENTICATED,
                lambda: auth.Refresh(find(messages, "RefreshRequest")(refresh_token=again.refresh_token), timeout=30))
print("FLOW OK")
