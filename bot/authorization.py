"""Bolt's single-workspace authorization, without waiting on Slack before the ack.

Policy: Bolt asks ``auth.test`` once, before the first command's or press's listener runs, to
learn the bot's own user and bot ids, and keeps the answer. Asked on the request's path, a
Slack blip there held that first ack (a hung Web API: the request bound, past Slack's three
seconds) or refused the command with Bolt's "your installation with this app is no longer
available. Please reinstall" (a 500 or a rate limit) and ran nothing. The token is the bot's
own configuration, so a request is authorized with it at once; ``auth.test`` is asked in the
background (one at a time, counted and logged by ``bot.delivery`` when it fails) until it
answers, and its ids are added from then on. Nothing of this bot reads those ids (Bolt uses
them to ignore the bot's own message events, which the app does not subscribe to).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.middleware.authorization.async_internals import _is_no_auth_required
from slack_bolt.middleware.authorization.async_single_team_authorization import (
    AsyncSingleTeamAuthorization,
)
from slack_bolt.middleware.authorization.internals import _is_no_auth_test_call_required
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

log = structlog.get_logger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None]], Any]


class TokenAuthorization(AsyncSingleTeamAuthorization):
    """:class:`AsyncSingleTeamAuthorization` that authorizes with the bot's token while its
    ``auth.test`` is not answered yet, asking it in the background (``spawn``)."""

    def __init__(self, spawn: Spawn) -> None:
        super().__init__()
        self._spawn = spawn
        self._asking = False

    async def async_process(self, *, req: AsyncBoltRequest, resp: BoltResponse,
                            next: Callable[[], Awaitable[BoltResponse]]) -> BoltResponse:
        if self.auth_test_result is not None or _is_no_auth_required(req) or \
                _is_no_auth_test_call_required(req):
            return await super().async_process(req=req, resp=resp, next=next)
        client = req.context.client
        if not self._asking:
            self._asking = True
            self._spawn(self._ask(client))
        req.context.set_authorize_result(AuthorizeResult(
            enterprise_id=req.context.enterprise_id, team_id=req.context.team_id,
            bot_token=client.token, user_id=req.context.user_id))
        return await next()

    async def _ask(self, client: AsyncWebClient) -> None:
        try:
            self.auth_test_result = await client.auth_test()
        except Exception as exc:  # counted and logged by the client; asked again later
            log.warning("auth.test not answered; asked again with the next request",
                        error=str(exc) or type(exc).__name__)
        finally:
            self._asking = False


def install(app: AsyncApp, spawn: Spawn) -> None:
    """Put :class:`TokenAuthorization` in place of Bolt's own in ``app``'s middleware."""
    # Bolt builds its middleware list in AsyncApp.__init__ and offers no switch for this one.
    middleware = app._async_middleware_list
    for index, step in enumerate(middleware):
        if type(step) is AsyncSingleTeamAuthorization:
            middleware[index] = TokenAuthorization(spawn)
            return
    raise RuntimeError("Bolt's single-workspace authorization not found")


__all__ = ["TokenAuthorization", "install"]
