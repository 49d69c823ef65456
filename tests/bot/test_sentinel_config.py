"""``[redis]``: the Sentinel, TLS and ACL keys, as ``check-config`` reads them and as used.

The ACL test creates a throwaway user on the shared Redis (its own name, keys limited to its
own prefix) and deletes it afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import SentinelConnectionPool

from bot.config import ConfigError, RedisSection
from bot.config_file import parse_config
from bot.settings import Settings
from bot.store import RedisStore, StoreUnavailable
from probes.models import MetricPoint
from tests.bot.test_store_logs import log_state


@pytest.mark.parametrize(
    ("redis_toml", "error"),
    [
        ('sentinels = ["10.0.0.5:26379"]', "service_name (the monitored primary's name) is "
                                           "required"),
        ('service_name = "jt"', "service_name is set but sentinels is empty"),
        ('sentinels = ["10.0.0.5"]\nservice_name = "jt"', "'10.0.0.5' is not host:port"),
        ('sentinels = ["10.0.0.5:99999"]\nservice_name = "jt"', "is not host:port"),
        ('url = "http://redis:6379/0"', "scheme must be redis://, rediss:// (TLS) or unix://"),
        ('url = "redis://:hunter2@redis:6379/0"', "set REDIS_PASSWORD in the environment"),
        ("tls = true", "for one server write rediss:// in url"),
        ("db = -1", "greater than or equal to 0"),
    ],
)
def test_check_config_names_the_bad_redis_key(redis_toml: str, error: str) -> None:
    """Each bad ``[redis]`` is refused with its line and what is wrong."""
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[redis]\n{redis_toml}\n", source="jt.toml")
    message = str(caught.value)
    assert message.startswith("jt.toml:") and "redis" in message and error in message


def test_good_sentinel_section_is_accepted() -> None:
    """A full Sentinel section, IPv6 included, validates."""
    config = parse_config('[redis]\nsentinels = ["10.0.0.5:26379", "[::1]:26380"]\n'
                          'service_name = "jt"\nusername = "bot"\ntls = true\ndb = 2\n')
    assert config.redis.sentinels == ("10.0.0.5:26379", "[::1]:26380")


async def test_sentinel_section_builds_a_sentinel_managed_tls_client() -> None:
    """With sentinels, the store's pool asks the sentinels for ``service_name`` and uses TLS
    with the CA file, the ACL user and the password from the environment."""
    section = RedisSection(sentinels=("127.0.0.1:26379", "[::1]:26380"), service_name="jt",
                           username="bot", tls=True, tls_ca_file="/etc/ssl/ca.pem", db=3)
    settings = Settings.from_env({"SLACK_BOT_TOKEN": "x", "SLACK_SIGNING_SECRET": "y",
                                  "REDIS_PASSWORD": "pw", "REDIS_SENTINEL_PASSWORD": "spw"})
    assert settings.redis_password and settings.redis_sentinel_password
    store = RedisStore.from_config(
        section, password=settings.redis_password.get_secret_value(),
        sentinel_password=settings.redis_sentinel_password.get_secret_value())
    pool = store._r.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "jt"
    kwargs = pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("bot", "pw", 3)
    assert kwargs["ssl_ca_certs"] == "/etc/ssl/ca.pem"
    assert issubclass(pool.connection_class, SSLConnection)
    sentinels = [(c.connection_pool.connection_kwargs["host"],
                  c.connection_pool.connection_kwargs["port"])
                 for c in pool.sentinel_manager.sentinels]
    assert sentinels == [("127.0.0.1", 26379), ("::1", 26380)]
    assert {c.connection_pool.connection_kwargs["password"]
            for c in pool.sentinel_manager.sentinels} == {"spw"}
    await store.aclose()


ACL_CATEGORIES = ("+@read", "+@write", "+@scripting", "+@transaction", "+@connection")
"""What README says an ACL user needs (besides its key prefix): the test's user has no more."""


@pytest.fixture
def acl_user(redis_server: str) -> Iterator[tuple[str, str, str]]:
    """A throwaway ACL user allowed only keys under its own prefix: (user, password, prefix)."""
    name, password = f"jt-acl-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    prefix = f"{name}:"
    admin = redis.Redis.from_url(redis_server)
    admin.acl_setuser(name, enabled=True, passwords=[f"+{password}"], keys=[f"{prefix}*"],
                      commands=list(ACL_CATEGORIES))
    try:
        yield name, password, prefix
    finally:
        for key in admin.scan_iter(match=f"{prefix}*"):
            admin.delete(key)
        admin.acl_deluser(name)
        admin.close()


async def test_acl_user_with_password_from_the_environment(
    acl_user: tuple[str, str, str],
) -> None:
    """``username`` plus ``REDIS_PASSWORD`` authenticate as that ACL user; a wrong password is
    a StoreUnavailable, not a redis-py error."""
    name, password, prefix = acl_user
    section = RedisSection(username=name, key_prefix=prefix)
    store = RedisStore.from_config(section, password=password)
    try:
        assert await store.put_doc("probe", {"ok": True})
        assert await store.get_doc("probe") == {"ok": True}
        # The window merge's script names its keys (KEYS), so the key pattern allows it.
        for step in (1, 2):
            merged = await store.merge_histories(
                "alpha", {"1": [MetricPoint(step=step, values={"loss": 1.0})]})
        assert [p.step for p in merged["1"]] == [1, 2]
        # Log states and their texts: MULTI/EXEC transactions and the append script.
        state = log_state("/logs/1.out", text="{'loss': 0.5}\n" * 20)
        later = state.model_copy(update={"recent": state.recent + "{'loss': 0.4}\n"})
        await store.save_log_states("alpha", {"1": state})
        await store.save_log_states("alpha", {"1": later})
        assert await store.load_log_states("alpha") == {"1": later}
    finally:
        await store.aclose()
    wrong = RedisStore.from_config(section, password="not-it")
    try:
        with pytest.raises(StoreUnavailable, match="redis"):
            await wrong.ping()
    finally:
        await wrong.aclose()
