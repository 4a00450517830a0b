"""Signs AWS MSK IAM tokens with Amazon's Python signer (aws-msk-iam-sasl-signer-python) at a
fixed time, for the byte-for-byte comparison in crates/floe-cli/tests/kafka_security.rs.

stdin: a JSON list of cases {access_key_id, secret_access_key, session_token|null, region,
signed_at "YYYYMMDDTHHMMSSZ", user_agent}; stdout: a JSON list of [token, expiry_ms].
botocore's clock is frozen at each case's time, and the signer's User-Agent is the case's,
so the whole token is comparable."""
import datetime
import json
import sys
from unittest import mock

from botocore.credentials import Credentials
import aws_msk_iam_sasl_signer.MSKAuthTokenProvider as provider

out = []
for case in json.load(sys.stdin):
    at = datetime.datetime.strptime(case["signed_at"], "%Y%m%dT%H%M%SZ")
    creds = Credentials(case["access_key_id"], case["secret_access_key"], case["session_token"])
    with mock.patch("botocore.auth.get_current_datetime", return_value=at), mock.patch.object(
        provider, "__get_user_agent__", return_value=case["user_agent"]
    ):
        token, expiry = getattr(provider, "__construct_auth_token")(case["region"], creds)
    out.append([token, expiry])
json.dump(out, sys.stdout)
