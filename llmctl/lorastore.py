"""The store Ray Serve LLM loads LoRA adapters from, as its replicas see it (issue 25).

How Ray Serve LLM 2.60 loads an adapter (read in ray/llm/_internal/serve/
utils/lora_serve_utils.py and common/utils/cloud_filesystem/s3_filesystem.py):
a request for ``base:name`` makes the replica GET
``<dynamic_lora_loading_path>/name/adapter_config.json`` and download every
object under ``<path>/name/`` with a plain ``boto3.client("s3")``. So the
replica's environment decides everything, through botocore's own rules:

- the endpoint: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (an
  S3-compatible store); unset, AWS itself;
- the region: ``AWS_DEFAULT_REGION`` only. botocore ignores ``AWS_REGION``
  (it reads it only on AWS Lambda-like hosts), so the usual fix of
  ray-project/ray#55502, ``AWS_REGION`` in runtime_env, changes nothing for
  this loader; unset, requests are signed for us-east-1;
- credentials: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
  ``AWS_SESSION_TOKEN``, else the profile files and instance roles.

Ray swallows every error of that GET (``get_file`` logs and returns None) and
answers the request with 404 "Unable to find LoRA adapter config file": a
wrong endpoint, region or credential deploys fine and fails at query time.
``/v1/models`` lists the adapters with the same client from the ingress.

This module builds the same client from the environment a replica would get
(:func:`effective_env`) and talks to the store: list adapters, read their
config and safetensors headers, upload one. boto3 is imported lazily.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llmctl.sources import env_ref

# The variables botocore reads for S3 (and AWS_REGION, which it does not, to say so).
AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
SECRET_VARS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
DEFAULT_SIGNING_REGION = "us-east-1"
REGION_ERRORS = ("SignatureDoesNotMatch", "AuthorizationHeaderMalformed", "PermanentRedirect", "301",
                 "IllegalLocationConstraintException", "InvalidRegion")


class StoreError(Exception):
    """The store refused or could not be reached; ``kind`` says which."""

    def __init__(self, kind: str, message: str, code: str = ""):
        super().__init__(message)
        self.kind = kind  # endpoint | region | credentials | access | bucket | other
        self.message = message
        self.code = code


@dataclass
class StoreEnv:
    """The AWS settings a replica gets, where each came from, and what is unknown."""

    values: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # var -> "runtime_env", "${X} (local head)", ...
    unresolved: list[str] = field(default_factory=list)  # ${VAR}s with no value where they would be filled

    @property
    def endpoint(self) -> Optional[str]:
        return self.values.get("AWS_ENDPOINT_URL_S3") or self.values.get("AWS_ENDPOINT_URL")

    @property
    def region(self) -> Optional[str]:
        return self.values.get("AWS_DEFAULT_REGION")

    @property
    def signing_region(self) -> str:
        return self.region or DEFAULT_SIGNING_REGION

    def region_trap(self) -> Optional[str]:
        """AWS_REGION given where botocore reads AWS_DEFAULT_REGION."""
        r = self.values.get("AWS_REGION")
        if r and r != self.region:
            return (f"AWS_REGION is {r!r} but boto3, which Ray's LoRA loader uses, reads only AWS_DEFAULT_REGION "
                    f"({self.region or 'unset'}): requests are signed for {self.signing_region}")
        return None

    def describe(self) -> str:
        parts = [f"endpoint {self.endpoint or 'AWS (AWS_ENDPOINT_URL unset)'}", f"region {self.signing_region}"
                 + ("" if self.region else " (AWS_DEFAULT_REGION unset)")]
        return ", ".join(parts)


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b/``); the prefix ends in / (or is empty)."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    rest = rest.split("@", 1)[1] if rest.startswith("anonymous@") else rest
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/" if prefix else "")


def merged_env_vars(*runtime_envs: Any) -> dict[str, Any]:
    """env_vars as Serve merges them (an application's, then a deployment's over it)."""
    out: dict[str, Any] = {}
    for re_ in runtime_envs:
        ev = re_.get("env_vars") if isinstance(re_, dict) else None
        if isinstance(ev, dict):
            out.update(ev)
    return out


def effective_env(env_vars: dict[str, Any], node_env: Optional[dict[str, str]], shell_env: dict[str, str]) -> StoreEnv:
    """The AWS settings of a replica: runtime_env's env_vars (a ``${VAR}`` is
    filled from the node's environment, as Ray does), else what the node's
    processes inherit. ``node_env`` is the local head's environment when
    known; None for a cluster llmctl did not start, where this shell stands
    in for the nodes (said in ``origin``)."""
    node = node_env if node_env is not None else shell_env
    where = "the local head" if node_env is not None else "this shell (standing in for the cluster's nodes)"
    se = StoreEnv()
    for var in AWS_VARS:
        if var in env_vars:
            raw = env_vars[var]
            ref = env_ref(raw)
            if ref:
                value = node.get(ref)
                if value:
                    se.values[var], se.origin[var] = value, f"runtime_env ${{{ref}}}, from {where}"
                else:
                    se.unresolved.append(ref)
                    se.origin[var] = f"runtime_env ${{{ref}}}, unset in {where}"
            elif raw not in (None, ""):
                se.values[var], se.origin[var] = str(raw), "runtime_env"
        elif node.get(var):
            se.values[var], se.origin[var] = node[var], f"inherited from {where}"
    return se


# botocore's logical config names and the variables it reads them from
# (botocore/configprovider.py, BOTOCORE_DEFAUT_SESSION_VARIABLES): set on the
# session from the replica's settings, None where the replica has none.
_CONFIG_VARS = {"region": "AWS_DEFAULT_REGION", "profile": "AWS_PROFILE", "endpoint_url": "AWS_ENDPOINT_URL",
                "config_file": "AWS_CONFIG_FILE", "credentials_file": "AWS_SHARED_CREDENTIALS_FILE"}


def session(se: StoreEnv):
    """A boto3 session resolved from exactly the replica's AWS settings, the
    way botocore resolves them from an environment, without this process's
    ``os.environ``: the config variables are set on the session (unset ones
    as None, so this shell's values never stand in), and the credential chain
    reads its environment provider from ``se.values``."""
    import boto3
    import botocore.session
    from botocore.credentials import EnvProvider

    bs = botocore.session.Session()
    for name, var in _CONFIG_VARS.items():
        value = se.values.get(var)
        if value is not None or name not in ("config_file", "credentials_file"):  # unset: botocore's default files
            bs.set_config_variable(name, value)
    resolver = bs.get_component("credential_provider")
    resolver.remove("env")
    resolver.insert_before(resolver.providers[0].METHOD, EnvProvider(environ=dict(se.values)))
    return boto3.session.Session(botocore_session=bs)


def client(se: StoreEnv, *, timeout: float = 5.0):
    """A boto3 S3 client resolved from these settings the way the replica's is
    (:func:`session`), with short timeouts and no retries so a dead endpoint
    fails fast."""
    try:
        from botocore.config import Config
    except ImportError as e:  # pragma: no cover - boto3 is a dependency
        raise StoreError("other", f"boto3 is needed to read an s3:// store ({e})") from None
    import logging

    for name in ("botocore", "boto3", "s3transfer"):  # Ray's logging setup would print their INFO lines
        logging.getLogger(name).setLevel(logging.WARNING)
    return session(se).client("s3", endpoint_url=se.endpoint,
                              config=Config(connect_timeout=timeout, read_timeout=timeout,
                                            retries={"max_attempts": 1, "mode": "standard"}))


def classify(e: Exception, se: StoreEnv) -> StoreError:
    """A botocore exception as what it means for Ray's loader."""
    from botocore import exceptions as bx

    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return StoreError("endpoint", f"cannot reach the store at {se.endpoint or 'AWS'} ({e})")
    if isinstance(e, bx.NoCredentialsError):
        return StoreError("credentials", "no AWS credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile or a role)")
    if isinstance(e, bx.ClientError):
        err = e.response.get("Error", {})
        code = str(err.get("Code", ""))
        headers = e.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        hint = headers.get("x-amz-bucket-region") or err.get("Region")
        if code in REGION_ERRORS:
            msg = f"the store refused a request signed for region {se.signing_region} ({code})"
            if hint:
                msg += f"; the bucket is in {hint}"
            return StoreError("region", msg, code)
        if code in ("NoSuchBucket",):
            return StoreError("bucket", f"no such bucket ({code})", code)
        if code in ("InvalidAccessKeyId", "AccessDenied", "403", "ExpiredToken"):
            detail = f"{code}: {err.get('Message')}" if err.get("Message") else code
            return StoreError("access", f"the store denied access ({detail})", code)
        return StoreError("other", f"{code}: {err.get('Message', e)}", code)
    if isinstance(e, bx.BotoCoreError):
        return StoreError("other", str(e))
    raise e


def list_adapters(c, uri: str, se: StoreEnv) -> list[str]:
    """The adapter names under ``uri``: its immediate sub-folders, as Ray lists them."""
    bucket, prefix = split_uri(uri)
    names: list[str] = []
    try:
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
            for cp in page.get("CommonPrefixes", []) or []:
                name = cp["Prefix"][len(prefix):].rstrip("/")
                if name:
                    names.append(name)
    except Exception as e:  # noqa: BLE001 - classified
        raise classify(e, se) from None
    return names


def adapter_files(c, uri: str, name: str, se: StoreEnv) -> dict[str, int]:
    """Object name -> size under ``<uri>/<name>/``."""
    bucket, prefix = split_uri(uri)
    out: dict[str, int] = {}
    try:
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}{name}/"):
            for obj in page.get("Contents", []) or []:
                out[obj["Key"][len(prefix) + len(name) + 1:]] = int(obj.get("Size", 0))
    except Exception as e:  # noqa: BLE001
        raise classify(e, se) from None
    return out


def get_object(c, uri: str, key: str, se: StoreEnv, *, byte_range: Optional[str] = None) -> Optional[bytes]:
    """The object's bytes, or None if it does not exist."""
    bucket, prefix = split_uri(uri)
    try:
        kw = {"Range": byte_range} if byte_range else {}
        return c.get_object(Bucket=bucket, Key=prefix + key, **kw)["Body"].read()
    except Exception as e:  # noqa: BLE001
        from botocore.exceptions import ClientError

        if isinstance(e, ClientError) and str(e.response.get("Error", {}).get("Code")) in ("NoSuchKey", "404"):
            return None
        raise classify(e, se) from None


def adapter_config(c, uri: str, name: str, se: StoreEnv) -> Optional[dict]:
    """``<uri>/<name>/adapter_config.json`` parsed; None if missing; ValueError if not JSON."""
    raw = get_object(c, uri, f"{name}/adapter_config.json", se)
    if raw is None:
        return None
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def safetensors_shapes(c, uri: str, key: str, se: StoreEnv) -> Optional[dict[str, list[int]]]:
    """Tensor name -> shape from a safetensors file's header (two ranged GETs)."""
    head = get_object(c, uri, key, se, byte_range="bytes=0-7")
    if head is None or len(head) < 8:
        return None
    n = int.from_bytes(head[:8], "little")
    if not 0 < n < 64 * 2**20:
        return None
    raw = get_object(c, uri, key, se, byte_range=f"bytes=8-{7 + n}")
    header = json.loads(raw.decode("utf-8")) if raw else {}
    return {k: list(v.get("shape", [])) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}


def upload_dir(c, local: Path, uri: str, name: str, se: StoreEnv) -> list[str]:
    """Upload every file under ``local`` to ``<uri>/<name>/``; adapter_config.json
    last, so a request racing the upload finds either no adapter or all of it."""
    bucket, prefix = split_uri(uri)
    files = sorted((p for p in local.rglob("*") if p.is_file()), key=lambda p: (p.name == "adapter_config.json", str(p)))
    keys = []
    try:
        for p in files:
            key = f"{prefix}{name}/{p.relative_to(local).as_posix()}"
            c.upload_file(str(p), bucket, key)
            keys.append(key)
    except Exception as e:  # noqa: BLE001
        from boto3.exceptions import S3UploadFailedError

        if isinstance(e, S3UploadFailedError) and e.__context__ is not None:
            raise classify(e.__context__, se) from None
        raise classify(e, se) from None
    return keys
