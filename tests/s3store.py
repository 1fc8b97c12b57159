"""The loopback S3 store of the LoRA tests (scripts/loopback_s3.py: moto's
server plus a SigV4 region check), started as a process and stopped by PID.

A session plans it before the Ray head starts (:func:`plan`): the head must
hold the store's settings in its environment, because a serve config names
them by reference (``AWS_ENDPOINT_URL: ${AWS_ENDPOINT_URL}``) and Ray fills
those from the node's environment. The credentials are dummy values.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REGION = "eu-west-1"  # not boto3's default, so a missing AWS_DEFAULT_REGION shows
BUCKET = "llmctl-loras"
KEY_ID = "llmctl-test-key-id"
SECRET = "llmctl-test-secret-not-real"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Store:
    port: int
    region: str = REGION
    bucket: str = BUCKET
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **over: str) -> dict[str, str]:
        """The standard AWS settings that reach this store."""
        env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": self.region,
               "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
        env.update(over)
        return {k: v for k, v in env.items() if v is not None}

    def client(self, **over: str):
        import boto3

        e = self.env(**over)
        return boto3.client("s3", endpoint_url=e.get("AWS_ENDPOINT_URL"), region_name=e.get("AWS_DEFAULT_REGION"),
                            aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)

    def upload(self, local: Path, prefix: str) -> None:
        c = self.client()
        for f in sorted(p for p in Path(local).rglob("*") if p.is_file()):
            c.upload_file(str(f), self.bucket, f"{prefix.strip('/')}/{f.relative_to(local).as_posix()}")

    def start(self, log: Path) -> "Store":
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "scripts" / "loopback_s3.py"), "--port", str(self.port), "--region", self.region,
             "--bucket", self.bucket], stdout=subprocess.PIPE, stderr=log.open("w"), stdin=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and self.proc.poll() is None:
            line = self.proc.stdout.readline()
            if line.startswith("ready "):
                return self
        self.stop()
        raise RuntimeError(f"the loopback S3 store did not start: {line!r} {log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def plan() -> Store:
    return Store(free_port())


def set_env(store: Store) -> dict[str, str | None]:
    """Put the store's settings in os.environ; returns what to restore."""
    saved = {}
    for k, v in store.env().items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    return saved
