"""Druid's basic-security API (`/druid-ext/basic-security/...`), so a Druid admin's scripts
work: users and their credentials (authentication), users, roles, role assignment and
permissions (authorization); plus API tokens of a user. Each call needs READ (GET) or WRITE
on the CONFIG resource `security`, as in Druid. No change may leave nobody able to manage
security, and nobody deletes the user they are logged in as."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy.orm import Session

from supervisor.api.auth import identity, require
from supervisor.api.common import JSON_BODY, in_session, json_body
from supervisor.api.context import context
from supervisor.errors import BadRequestError
from supervisor.model.access import SECURITY, Action, ResourceType
from supervisor.services.security import SecurityService

T = TypeVar("T")
BASE = "/druid-ext/basic-security"
router = APIRouter(prefix=BASE, tags=["security"])


async def _security(request: Request) -> None:
    action = Action.READ if request.method in ("GET", "HEAD") else Action.WRITE
    require(identity(request), ResourceType.CONFIG, SECURITY, action)


router.dependencies.append(Depends(_security))


def _authenticator(request: Request, name: str) -> None:
    if name != context(request).settings.authenticator_name:
        raise BadRequestError(
            f"Basic authenticator with name [{name}] does not exist.", field="authenticatorName"
        )


def _authorizer(request: Request, name: str) -> None:
    if name != context(request).settings.authorizer_name:
        raise BadRequestError(
            f"Basic authorizer with name [{name}] does not exist.", field="authorizerName"
        )


async def _run(request: Request, work: Callable[[SecurityService], T], writes: bool = False) -> T:
    app = context(request)

    def then(_: T) -> None:
        if writes and app.authenticator is not None:
            app.authenticator.forget()

    who = identity(request)
    me = who.name if who.authenticated else ""

    def run(session: Session) -> T:
        service = SecurityService(session, app.clock, me)
        return service.keeping_an_administrator(lambda: work(service)) if writes else work(service)

    return await in_session(request, run, then)


AUTHN = "/authentication/db/{authenticatorName}"
AUTHZ = "/authorization/db/{authorizerName}"


@router.get("/authentication/loadStatus", summary="Whether each authenticator's users are loaded")
async def authn_load_status(request: Request) -> dict[str, bool]:
    return {context(request).settings.authenticator_name: True}


@router.get(AUTHN + "/users", summary="User names (authentication)")
async def authn_users(request: Request, authenticatorName: str) -> list[str]:
    _authenticator(request, authenticatorName)
    return await _run(request, lambda svc: svc.authn_users())


@router.get(AUTHN + "/users/{userName}", summary="A user and whether it has credentials")
async def authn_user(request: Request, authenticatorName: str, userName: str) -> dict[str, Any]:
    _authenticator(request, authenticatorName)
    return await _run(request, lambda svc: svc.authn_user(userName))


@router.post(AUTHN + "/users/{userName}", summary="Create a user (authentication)")
async def create_authn_user(request: Request, authenticatorName: str, userName: str) -> Response:
    _authenticator(request, authenticatorName)
    await _run(request, lambda svc: svc.create_authn_user(userName), writes=True)
    return Response()


@router.delete(AUTHN + "/users/{userName}", summary="Delete a user and its API tokens")
async def delete_authn_user(request: Request, authenticatorName: str, userName: str) -> Response:
    _authenticator(request, authenticatorName)
    await _run(request, lambda svc: svc.delete_authn_user(userName), writes=True)
    return Response()


@router.post(
    AUTHN + "/users/{userName}/credentials",
    openapi_extra=JSON_BODY,
    summary='Set a user\'s password: {"password": "..."}',
)
async def set_credentials(
    request: Request, authenticatorName: str, userName: str, body: Any = Depends(json_body)
) -> Response:
    _authenticator(request, authenticatorName)
    await _run(request, lambda svc: svc.set_credentials(userName, body), writes=True)
    return Response()


@router.get(AUTHN + "/users/{userName}/tokens", summary="A user's API tokens (names only)")
async def tokens(request: Request, authenticatorName: str, userName: str) -> list[dict[str, str]]:
    _authenticator(request, authenticatorName)
    return await _run(request, lambda svc: svc.tokens(userName))


@router.post(
    AUTHN + "/users/{userName}/tokens/{tokenName}",
    summary="Make an API token for a user; the answer is the only time it is shown",
)
async def create_token(
    request: Request, authenticatorName: str, userName: str, tokenName: str
) -> dict[str, str]:
    _authenticator(request, authenticatorName)
    return await _run(request, lambda svc: svc.create_token(userName, tokenName), writes=True)


@router.delete(AUTHN + "/users/{userName}/tokens/{tokenName}", summary="Revoke an API token")
async def delete_token(
    request: Request, authenticatorName: str, userName: str, tokenName: str
) -> Response:
    _authenticator(request, authenticatorName)
    await _run(request, lambda svc: svc.delete_token(userName, tokenName), writes=True)
    return Response()


@router.get("/authorization/loadStatus", summary="Whether each authorizer's roles are loaded")
async def authz_load_status(request: Request) -> dict[str, bool]:
    return {context(request).settings.authorizer_name: True}


@router.get(AUTHZ + "/users", summary="User names (authorization)")
async def authz_users(request: Request, authorizerName: str) -> list[str]:
    _authorizer(request, authorizerName)
    return await _run(request, lambda svc: svc.authz_users())


@router.get(AUTHZ + "/users/{userName}", summary="A user's roles (?full: with permissions)")
async def authz_user(
    request: Request,
    authorizerName: str,
    userName: str,
    full: str | None = Query(None),
    simplifyPermissions: str | None = Query(None),
) -> dict[str, Any]:
    _authorizer(request, authorizerName)
    full_, simple = full is not None, simplifyPermissions is not None
    return await _run(request, lambda svc: svc.authz_user(userName, full_, simple))


@router.post(AUTHZ + "/users/{userName}", summary="Create a user (authorization)")
async def create_authz_user(request: Request, authorizerName: str, userName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.create_authz_user(userName), writes=True)
    return Response()


@router.delete(AUTHZ + "/users/{userName}", summary="Delete a user (authorization)")
async def delete_authz_user(request: Request, authorizerName: str, userName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.delete_authz_user(userName), writes=True)
    return Response()


@router.get(AUTHZ + "/roles", summary="Role names")
async def roles(request: Request, authorizerName: str) -> list[str]:
    _authorizer(request, authorizerName)
    return await _run(request, lambda svc: svc.roles())


@router.get(AUTHZ + "/roles/{roleName}", summary="A role's permissions (?full: and its users)")
async def role(
    request: Request,
    authorizerName: str,
    roleName: str,
    full: str | None = Query(None),
    simplifyPermissions: str | None = Query(None),
) -> dict[str, Any]:
    _authorizer(request, authorizerName)
    full_, simple = full is not None, simplifyPermissions is not None
    return await _run(request, lambda svc: svc.role(roleName, full_, simple))


@router.post(AUTHZ + "/roles/{roleName}", summary="Create a role (no permissions yet)")
async def create_role(request: Request, authorizerName: str, roleName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.create_role(roleName), writes=True)
    return Response()


@router.delete(AUTHZ + "/roles/{roleName}", summary="Delete a role")
async def delete_role(request: Request, authorizerName: str, roleName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.delete_role(roleName), writes=True)
    return Response()


@router.post(AUTHZ + "/users/{userName}/roles/{roleName}", summary="Give a user a role")
async def assign(request: Request, authorizerName: str, userName: str, roleName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.assign(userName, roleName), writes=True)
    return Response()


@router.delete(AUTHZ + "/users/{userName}/roles/{roleName}", summary="Take a role from a user")
async def unassign(request: Request, authorizerName: str, userName: str, roleName: str) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.unassign(userName, roleName), writes=True)
    return Response()


@router.post(
    AUTHZ + "/roles/{roleName}/permissions",
    openapi_extra=JSON_BODY,
    summary="Replace a role's permissions: [{resource: {name: regex, type}, action}]",
)
async def set_permissions(
    request: Request, authorizerName: str, roleName: str, body: Any = Depends(json_body)
) -> Response:
    _authorizer(request, authorizerName)
    await _run(request, lambda svc: svc.set_permissions(roleName, body), writes=True)
    return Response()
