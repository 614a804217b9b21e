"""What counts as a secret, and how it is masked."""

from __future__ import annotations

import pytest

from eventlake.config.loader import settings_from_dict
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.secrets import MASK, mask_text, masked, secret_name


@pytest.mark.parametrize(
    "name",
    ["password", "postgres_password", "spark.hadoop.fs.s3a.secret.key", "api_token",
     "EVENTLAKE_METRICS_TOKEN", "sasl.jaas.config", "fs.s3a.access.key",
     "fs.azure.account.key.x.dfs.core.windows.net", "sig", "credentials"],
)  # fmt: skip
def test_names_that_hold_secrets(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize(
    "name", ["topic", "bootstrap_servers", "max_offsets_per_trigger", "sink_url", "design"]
)
def test_names_that_do_not(name: str) -> None:
    assert not secret_name(name)


def test_urls_lose_their_credentials_and_secret_query_values() -> None:
    text = "POST to https://bot:hunter22@api.example.com/v1?token=abc123&page=2&sig=zz failed"
    assert mask_text(text) == (
        f"POST to https://bot:{MASK}@api.example.com/v1?token={MASK}&page=2&sig={MASK} failed"
    )
    assert mask_text("http://example.com/a?b=c") == "http://example.com/a?b=c"


def test_known_values_are_masked_anywhere() -> None:
    assert mask_text("key was s3cr3t-value here", ["s3cr3t-value"]) == f"key was {MASK} here"
    assert mask_text("a b", ["b"]) == "a b"  # too short to mask safely


def test_nested_data_masks_by_key_and_by_value() -> None:
    data = {"conf": {"spark.hadoop.fs.s3a.secret.key": "x1", "spark.sql.x": "1"},
            "params": {"url": "http://u:p4ss@h/", "note": "has zzzz-env inside"},
            "password": None}  # fmt: skip
    assert masked(data, ["zzzz-env"]) == {
        "conf": {"spark.hadoop.fs.s3a.secret.key": MASK, "spark.sql.x": "1"},
        "params": {"url": f"http://u:{MASK}@h/", "note": f"has {MASK} inside"},
        "password": None,
    }


def test_settings_know_their_secret_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_API_TOKEN", "from-the-env-1")
    monkeypatch.setenv("PLAIN_VALUE", "not-secret-2")
    settings = settings_from_dict({
        "spark": {"conf": {"spark.hadoop.fs.s3a.secret.key": "s3-secret-3"}},
        "metrics": {"token": "metrics-token-4"},
        "pipelines": {"p": {"header": "${PARTNER_API_TOKEN}", "other": "${PLAIN_VALUE}",
                            "db_password": "pw-5"}},
    })  # fmt: skip
    found = set(settings.secret_values)
    assert {"from-the-env-1", "s3-secret-3", "metrics-token-4", "pw-5"} <= found
    assert "not-secret-2" not in found
    # model_copy keeps them
    assert set(settings.model_copy(update={}).secret_values) == found


def test_an_error_never_shows_a_urls_password() -> None:
    err = EventlakeError(ErrorCode.SINK_WRITE_FAILED, "POST https://u:pw-123@h/x?token=t-1 failed")
    assert "pw-123" not in err.render()
    assert "t-1" not in err.render()
