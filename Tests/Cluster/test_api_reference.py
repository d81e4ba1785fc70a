"""The generated API reference (docs/api, from proto/plugin/protoc-gen-kindred-docs) without a cluster: openapi.json
is a valid OpenAPI 3.1 document (openapi-spec-validator), it describes every unary RPC of the public services with
the proto3 JSON mapping (lowerCamelCase, 64-bit integers as strings, enums by name, bytes as base64, unknown fields
refused) and the Connect error for every documented code, and each service has a page with every RPC, its errors
and a curl line. That the committed files match the protos is proto/check-generated.sh's job."""
import copy
import json
import pathlib
import re
import subprocess

import pytest
from google.protobuf import descriptor_pb2
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

ROOT = pathlib.Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
PACKAGE = "kindred.api.v1"
CONNECT_STATUS = {"invalid_argument": "400", "failed_precondition": "400", "unauthenticated": "401",
                  "permission_denied": "403", "not_found": "404", "already_exists": "409", "aborted": "409",
                  "resource_exhausted": "429", "unimplemented": "501", "unavailable": "503",
                  "deadline_exceeded": "504"}


@pytest.fixture(scope="module")
def document():
    return json.loads((API / "openapi.json").read_text())


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """The public services as protoc reads them from proto/ today: {full service name: [MethodDescriptorProto]}."""
    out = tmp_path_factory.mktemp("descriptors") / "api.pb"
    protos = sorted(str(path.relative_to(ROOT / "proto")) for path in (ROOT / "proto/kindred/api/v1").glob("*.proto"))
    subprocess.run(["/usr/bin/protoc", "-I", str(ROOT / "proto"), f"--descriptor_set_out={out}", *protos], check=True)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    found = {f"{file.package}.{service.name}": list(service.method)
             for file in files if file.package == PACKAGE for service in file.service}
    assert len(found) >= 7, found.keys()
    return found


def test_openapi_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1")
    validate(document)


@pytest.mark.parametrize("breakage", ["no info", "bad schema type", "parameter in the body"])
def test_the_validator_refuses_a_broken_copy(document, breakage):
    broken = copy.deepcopy(document)
    operation = broken["paths"]["/kindred.api.v1.DeckService/Swipe"]["post"]
    if breakage == "no info":
        del broken["info"]
    elif breakage == "bad schema type":
        broken["components"]["schemas"]["kindred.api.v1.SwipeRequest"]["type"] = "struct"
    else:
        operation["parameters"][0]["in"] = "body"
    with pytest.raises(OpenAPIValidationError):
        validate(broken)


def refs(node):
    if isinstance(node, dict):
        yield from ([node["$ref"]] if "$ref" in node else [])
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def test_every_reference_resolves(document):
    """The validator does not follow $refs; a dangling one would break every client generator."""
    targets = set(refs(document))
    assert len(targets) > 100
    for target in targets:
        assert target.startswith("#/components/schemas/"), target
        assert target.rsplit("/", 1)[1] in document["components"]["schemas"], target


def test_every_unary_rpc_is_a_post_and_no_streaming_one_is(document, services):
    expected = {f"/{service}/{method.name}" for service, methods in services.items() for method in methods
                if not method.client_streaming and not method.server_streaming}
    assert set(document["paths"]) == expected
    for path, item in document["paths"].items():
        assert list(item) == ["post"], path
    assert "/kindred.api.v1.ChatService/Subscribe" not in document["paths"]
    assert "/kindred.api.v1.ProfileService/UploadPhoto" not in document["paths"]


def test_requests_and_responses_follow_the_proto3_json_mapping(document):
    schemas = document["components"]["schemas"]
    tokens = schemas["kindred.api.v1.AuthTokens"]["properties"]
    assert tokens["accessTokenExpiresUnixMs"]["type"] == "string"  # int64 as a string
    assert tokens["accessTokenExpiresUnixMs"]["format"] == "int64"
    assert "access_token" not in tokens and "accessToken" in tokens
    swipe = schemas["kindred.api.v1.SwipeRequest"]
    assert swipe["additionalProperties"] is False  # unknown fields are refused
    assert swipe["properties"]["action"]["allOf"] == [{"$ref": "#/components/schemas/kindred.common.v1.SwipeAction"}]
    assert schemas["kindred.common.v1.SwipeAction"]["enum"] == [
        "SWIPE_ACTION_UNSPECIFIED", "SWIPE_ACTION_LIKE", "SWIPE_ACTION_PASS"]
    photo = schemas["kindred.api.v1.GetPhotoResponse"]["properties"]
    assert photo["data"]["contentEncoding"] == "base64" and photo["data"]["type"] == "string"
    assert schemas["kindred.api.v1.SignUpResponse"]["properties"]["resendAfterSeconds"]["type"] == "integer"
    # A oneof: at most one member.
    verify = schemas["kindred.api.v1.VerifyEmailRequest"]
    assert {"required": ["token", "code"]} in verify["allOf"][0]["not"]["anyOf"]


def test_every_documented_code_has_its_connect_status_and_the_error_schema(document):
    for path, item in document["paths"].items():
        operation = item["post"]
        codes = operation["x-connect-codes"]
        assert {"invalid_argument", "unavailable", "deadline_exceeded", "resource_exhausted"} <= set(codes), path
        assert "internal" not in codes and "unknown" not in codes
        for code in codes:
            response = operation["responses"][CONNECT_STATUS[code]]
            assert code in response["description"], (path, code)
            assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/connect.Error"}
        anyone = re.search(r"\bAnyone\b", operation["description"]) is not None
        assert ("unauthenticated" in codes) or anyone, path
        assert operation["security"] == ([{}, {"bearer": []}] if anyone else [{"bearer": []}]), path
    swipe = document["paths"]["/kindred.api.v1.DeckService/Swipe"]["post"]
    assert {"not_found", "failed_precondition", "unauthenticated"} <= set(swipe["x-connect-codes"])
    assert "ALREADY_SWIPED" in swipe["responses"]["400"]["description"]
    admin = document["paths"]["/kindred.api.v1.AdminService/ListAccounts"]["post"]
    assert "permission_denied" in admin["x-connect-codes"]


def test_each_service_has_a_page_with_every_rpc_its_errors_and_a_curl_line(services):
    index = (API / "README.md").read_text()
    for service, methods in services.items():
        name = service.rsplit(".", 1)[1]
        page = (API / f"{name}.md").read_text()
        assert f"]({name}.md)" in index
        sections = re.split(r"^### ", page, flags=re.MULTILINE)
        for method in methods:
            section = next(text for text in sections if text.startswith(method.name + "\n"))
            assert f"`POST /{service}/{method.name}`" in section
            assert "| `INVALID_ARGUMENT` | 400 `invalid_argument` |" in section
            if method.client_streaming:
                assert "gRPC client" in section
                continue
            curl = re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)
            assert f"http://127.0.0.1:50050/{service}/{method.name}" in curl
            body = re.search(r"'(\{.*\})'", curl).group(1)
            json.loads(body)
            if "anyone (a bearer token" not in section:
                assert '-H "Authorization: Bearer $TOKEN"' in curl
    deck = (API / "DeckService.md").read_text()
    assert '"targetUserId": "TARGET_USER_ID", "action": "SWIPE_ACTION_LIKE"' in deck
    assert "| `targetUserId` | string | The member. |" in deck


def test_the_curl_bodies_use_only_fields_of_the_request(document):
    """Every example body would pass the schema's unknown-field rule (a typo in the examples table would not)."""
    schemas = document["components"]["schemas"]

    def check(value, schema_name, where):
        schema = schemas[schema_name]
        for key, item in value.items():
            assert key in schema["properties"], f"{where}: {key} is not a field of {schema_name}"
            prop = schema["properties"][key]
            ref = prop.get("allOf", [{}])[0].get("$ref") or prop.get("items", {}).get("$ref")
            if ref and ref.rsplit("/", 1)[1] in schemas and schemas[ref.rsplit("/", 1)[1]]["type"] == "object":
                for element in (item if isinstance(item, list) else [item]):
                    check(element, ref.rsplit("/", 1)[1], where)

    for page in API.glob("*Service.md"):
        for body, path in re.findall(r"-d '(\{.*\})' \\\n  http://127\.0\.0\.1:50050(/\S+)", page.read_text()):
            request = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
            check(json.loads(body), request["$ref"].rsplit("/", 1)[1], path)
