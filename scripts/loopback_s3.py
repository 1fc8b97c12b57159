"""An S3-compatible store on loopback for LoRA tests and the demo (issue 25).

moto's S3 server (``pip install "moto[server]"``, the dev extra) behind one
rule moto lacks: a request signed for a region other than the store's is
refused with 403 SignatureDoesNotMatch and no hint of the right region, as
S3-compatible servers that check the SigV4 credential scope against their
own region do. That is what makes the misconfiguration of ray-project/ray#55502
(a wrong AWS_REGION: the adapter deploys, then 404s at query time) happen on
this machine. Unsigned requests and requests for the store's region pass.

    python scripts/loopback_s3.py --port 9000 --region eu-west-1 [--bucket NAME ...]

Binds 127.0.0.1 only; prints ``ready http://127.0.0.1:PORT`` once it serves.
Any access key and secret are accepted (moto does not check them); tests pass
dummy values through the standard AWS_* variables. Stop it by its PID.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/(?P<region>[^/,\s]+)/s3/aws4_request")
_QUERY_SCOPE = re.compile(r"X-Amz-Credential=[^&]*?%2F\d{8}%2F(?P<region>[^%&]+)%2Fs3", re.I)

_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
    b"<Message>The request signature we calculated does not match the signature you provided. "
    b"Check your key and signing method.</Message></Error>"
)


def region_guard(app, region: str):
    """WSGI middleware: refuse requests signed for another region."""

    def guarded(environ, start_response):
        auth = environ.get("HTTP_AUTHORIZATION", "")
        m = _SCOPE.search(auth) or _QUERY_SCOPE.search(environ.get("QUERY_STRING", ""))
        if m and m.group("region") != region:
            start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(_DENIED)))])
            return [_DENIED]
        return app(environ, start_response)

    return guarded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--region", default="us-east-1", help="The store's region; requests signed for another are refused.")
    ap.add_argument("--bucket", action="append", default=[], help="Create this bucket (in --region) at start.")
    args = ap.parse_args(argv)

    os.environ.setdefault("MOTO_PORT", str(args.port))
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", args.port, region_guard(app, args.region), threaded=True,
                         request_handler=MotoRequestHandler)
    if args.bucket:
        import boto3

        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{args.port}", region_name=args.region,
                          aws_access_key_id="setup", aws_secret_access_key="setup")
        import threading

        t = threading.Thread(target=server.serve_forever, daemon=True)
        t.start()
        for b in args.bucket:
            extra = {} if args.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": args.region}}
            s3.create_bucket(Bucket=b, **extra)
        print(f"ready http://127.0.0.1:{args.port}", flush=True)
        try:
            t.join()
        except KeyboardInterrupt:
            pass
        return 0
    print(f"ready http://127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
