#!/usr/bin/env python3
"""An OpenID provider's JWKS endpoint (what https://www.googleapis.com/oauth2/v3/certs and
https://appleid.apple.com/auth/keys serve): GET --path answers the JSON of --jwks (re-read on every request, so a
test can rotate keys) with `Cache-Control: public, max-age=<--max-age>` (none with --max-age -1). Every fetch is
recorded (--record). HTTP/2 over TLS with `h2`, independent of Kindred's code."""
from h2_peer import Recorder, Response, common_arguments, serve


def main():
    parser = common_arguments(__doc__.splitlines()[0])
    parser.add_argument("--jwks", required=True, help="JSON file served as the key set")
    parser.add_argument("--path", default="/oauth2/v3/certs")
    parser.add_argument("--max-age", type=int, default=3600)
    args = parser.parse_args()
    recorder = Recorder(args.record)

    def handle(request):
        if request.method != "GET" or request.path != args.path:
            recorder.record({"path": request.path, "status": 404})
            return Response(404, b"")
        with open(args.jwks, "rb") as handle:
            body = handle.read()
        headers = [("content-type", "application/json; charset=UTF-8")]
        if args.max_age >= 0:
            headers.append(("cache-control", f"public, max-age={args.max_age}, must-revalidate, no-transform"))
        recorder.record({"path": request.path, "status": 200})
        return Response(200, body, headers)

    serve(args, handle)


if __name__ == "__main__":
    main()
