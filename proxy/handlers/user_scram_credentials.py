"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0
(KIP-554): the decisions in ``proxy/sasl/scram_admin.py``, the credentials in the broker's
durable SCRAM store (``proxy/sasl/scram_store.py``), used by SCRAM logins at once.

DescribeUserScramCredentials needs DESCRIBE on the cluster, AlterUserScramCredentials ALTER,
else CLUSTER_AUTHORIZATION_FAILED "Cluster authorization failed." as Kafka's getErrorResponse
answers it.
"""

from __future__ import annotations

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from proxy.acl.checks import MESSAGES, cluster_allows
from proxy.acl.model import AclOperation
from proxy.context import RequestContext
from proxy.registry import handler
from proxy.sasl.scram_admin import Outcome, Upsert, alter, describe
from proxy.sasl.scram_store import Deletions, Upserts, Users
from wire.values import NO_THROTTLE


@handler(
    api_key=50,
    versions=(0, 0),
    request=DescribeUserScramCredentialsRequest,
    response=DescribeUserScramCredentialsResponse,
)
async def describe_user_scram_credentials(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not cluster_allows(ctx, AclOperation.DESCRIBE):
        # Kafka's getErrorResponse: the error at the top and once per user asked for, unnamed
        code = ErrorCode.cluster_authorization_failed
        return DescribeUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=MESSAGES[code],
            results=tuple(
                DescribeUserScramCredentialsResult(
                    user="", error_code=code, error_message=MESSAGES[code], credential_infos=()
                )
                for _ in req.users or ()
            ),
        )
    wanted = None if req.users is None else [u.name for u in req.users]
    results = tuple(
        DescribeUserScramCredentialsResult(
            user=o.user,
            error_code=o.code,
            error_message=o.message,
            credential_infos=tuple(
                CredentialInfo(mechanism=i8(m), iterations=i32(n)) for m, n in o.credentials
            ),
        )
        for o in describe(ctx.broker.scram.users(), wanted)
    )
    return DescribeUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=results
    )


def _alter_error_reply(
    req: AlterUserScramCredentialsRequest, code: ErrorCode
) -> AlterUserScramCredentialsResponse:
    names = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            AlterUserScramCredentialsResult(user=n, error_code=code, error_message=None)
            for n in names
        ),
    )


@handler(
    api_key=51,
    versions=(0, 0),
    request=AlterUserScramCredentialsRequest,
    response=AlterUserScramCredentialsResponse,
    error_reply=_alter_error_reply,
)
async def alter_user_scram_credentials(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not cluster_allows(ctx, AclOperation.ALTER):
        # Kafka's getErrorResponse: each user named, once, in name order
        code = ErrorCode.cluster_authorization_failed
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE,
            results=tuple(
                AlterUserScramCredentialsResult(
                    user=n, error_code=code, error_message=MESSAGES[code]
                )
                for n in names
            ),
        )
    deletions = [(d.name, int(d.mechanism)) for d in req.deletions]
    upserts = [
        Upsert(u.name, int(u.mechanism), int(u.iterations), u.salt, u.salted_password)
        for u in req.upsertions
    ]

    def decide(users: Users) -> tuple[Upserts, Deletions, list[Outcome]]:
        return alter(users, deletions, upserts)

    # decided on the users as the previous change left them; durable before the answer
    outcomes = await ctx.broker.scram.change(decide)
    return AlterUserScramCredentialsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            AlterUserScramCredentialsResult(user=o.user, error_code=o.code, error_message=o.message)
            for o in outcomes
        ),
    )
