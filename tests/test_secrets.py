"""One rule for "is this a secret" (llmctl.secrets): validate's literal-token
error, the RayService env check and the scrubbing of what llmctl prints give
the same answer for the same name and value."""

from __future__ import annotations

import pytest

from llmctl.launch.serve_api import secret_values
from llmctl.secrets import is_secret_name, literal_secret, looks_like_hf_token
from llmctl.validate.documents import _Doc, _Sink
from llmctl.validate.secrets import check_secrets

FAKE_HF = "hf_" + "Ab1" * 12  # token-shaped, not a token
CASES = [
    # (env var name, value, a secret?)
    ("HF_TOKEN", FAKE_HF, True),
    ("HF_TOKEN", "${HF_TOKEN}", False),
    ("HF_TOKEN_PATH", "/run/secrets/hf/token", False),
    ("OPENAI_API_KEY", "not-a-shape-but-a-value", True),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/var/keys/sa.json", True),
    ("MAX_TOKENS", "12345678", False),
    ("SOME_SETTING", FAKE_HF, True),  # a token shape under any name
    ("DB_PASSWORD", "<YOUR_PASSWORD>", False),  # a placeholder, not a value
    ("VLLM_LOGGING_LEVEL", "DEBUG_LEVEL_1", False),
]


@pytest.mark.parametrize("name,value,secret", CASES)
def test_validate_and_scrubbing_agree(name, value, secret):
    cfg = {"model_loading_config": {"model_id": "m"}, "runtime_env": {"env_vars": {name: value}}}
    sink = _Sink(_Doc("x.yaml", "model_loading_config: {}\n"))
    check_secrets(cfg, sink)
    flagged = any(d.code == "literal-token" for d in sink.items)
    status = {"applications": {"a": {"deployed_app_config": {"runtime_env": {"env_vars": {name: value}}, "args": {}}}}}
    scrubbed = value in secret_values(status)
    assert flagged == secret, [str(d) for d in sink.items]
    assert scrubbed == (secret and len(value) >= 8)
    assert (literal_secret(name, value) is not None) == secret


def test_names():
    assert all(is_secret_name(n) for n in ("hf_token", "HUGGING_FACE_HUB_TOKEN", "x_api_key", "apikey", "Password"))
    assert not any(is_secret_name(n) for n in ("HF_TOKEN_PATH", "max_tokens", "tokenizer", "secretariat", None, 3))
    assert looks_like_hf_token(FAKE_HF) and not looks_like_hf_token("HF_TOKEN") and not looks_like_hf_token("hf_short")
